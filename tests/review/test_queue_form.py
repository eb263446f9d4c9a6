"""The page form that creates a review queue, for each source."""

from __future__ import annotations

import pytest

from runs.models import ReviewQueue
from runs.review.services import queue_create
from tests.factories import make_dataset
from tests.review.builders import ended_run

URL = "/review/new/"


def _post(client, run, **fields):
    data = {"run": run.pk, "name": "checks", "source": "run", "raters": 1}
    data |= {"note": "on", "show_expected": "on", "blind": "on", "pass_at": "4"}
    return client.post(URL, data | fields)


def test_the_form_is_linked_and_shown(bob_client):
    assert 'id="queue-new"' in bob_client.get("/review/").content.decode()
    response = bob_client.get(f"{URL}?run=7")
    assert response.status_code == 200
    assert 'id="queue-form"' in response.content.decode()


@pytest.mark.parametrize(
    ("fields", "count"),
    [
        ({}, 10),
        ({"source": "filter", "filters": "verdict=failed&scorer=exact_match"}, 5),
        ({"source": "sample", "sample_size": 4, "sample_scorer": "exact_match"}, 4),
    ],
)
def test_an_editor_creates_a_queue(bob_client, dataset, fields, count):
    run = ended_run(dataset)
    response = _post(bob_client, run, **fields)
    assert response.status_code == 302, response.content.decode()
    queue = ReviewQueue.objects.get(name="checks")
    assert queue.run_id == run.pk and queue.items.count() == count
    assert queue.blind and queue.rubric["kind"] == "pass_fail"


def test_the_rubric_fields_make_the_rubric(bob_client, dataset):
    run = ended_run(dataset)
    response = _post(
        bob_client,
        run,
        kind="labels",
        labels="wrong, rude , off-topic",
        multiple="on",
        criteria="tone,facts",
        raters=3,
        reviewers="alice, bob",
    )
    assert response.status_code == 302, response.content.decode()
    queue = ReviewQueue.objects.get(name="checks")
    assert queue.rubric["labels"] == ["wrong", "rude", "off-topic"]
    assert queue.rubric["multiple"] and queue.rubric["criteria"] == ["tone", "facts"]
    assert queue.raters == 3 and not queue.open_pool
    assert sorted(u.username for u in queue.reviewers.all()) == ["alice", "bob"]


def test_a_comparison_from_the_form(bob_client, project, dataset):
    run = ended_run(dataset)
    other = ended_run(dataset, name="other")
    response = _post(bob_client, run, source="comparison", other_run=other.pk)
    assert response.status_code == 302, response.content.decode()
    queue = ReviewQueue.objects.get(name="checks")
    assert queue.other_run_id == other.pk and queue.rubric["kind"] == "preference"


def test_a_bad_field_is_shown_on_the_form(bob_client, dataset):
    run = ended_run(dataset)
    response = _post(bob_client, run, source="sample")
    assert response.status_code == 200
    html = response.content.decode()
    assert "must be a whole number" in html
    assert not ReviewQueue.objects.exists()
    queue_create(
        user=run.project.memberships.get(role="editor").user, run=run, name="checks"
    )
    taken = _post(bob_client, run)
    assert "has a queue named" in taken.content.decode()


def test_viewers_and_other_projects_are_refused(
    bob_client, victor_client, mallory_client, other_project, dataset
):
    run = ended_run(dataset)
    assert _post(victor_client, run).status_code == 403
    assert _post(mallory_client, run).status_code == 404
    theirs = ended_run(make_dataset(other_project, [{"input": "x", "expected": "y"}]))
    # A comparison with another project's run is refused too.
    from_bob = _post(bob_client, run, source="comparison", other_run=theirs.pk)
    assert from_bob.status_code == 404
    assert not ReviewQueue.objects.exists()

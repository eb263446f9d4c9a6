"""Labels: handed out once per reviewer and k per item, kept with their
history, and their consensus read as the run's scorer everywhere."""

from __future__ import annotations

import csv
import io
import json

import pytest

from runs.analysis.summary import run_summary
from runs.errors import Forbidden, InvalidInput
from runs.models import ReviewItem, ReviewLabel, ReviewLabelChange, Score
from runs.review.selectors import queue_label_matrix
from runs.review.services import label_next, label_save, queue_create
from tests.review.builders import ended_run

API = "/api/v1/review-queues"


def put(client, queue, label_id, **body):
    return client.put(
        f"{API}/{queue.pk}/labels/{label_id}",
        json.dumps(body),
        content_type="application/json",
    )


def label_all(user, queue, values) -> list[ReviewLabel]:
    """Take and label items in turn with ``values``."""
    labels = []
    for value in values:
        label = label_next(user=user, queue=queue)
        assert label is not None
        labels.append(label_save(user=user, label=label, value=value))
    return labels


def test_a_reviewer_never_gets_an_item_twice(alice, bob, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="q", raters=2)
    seen = []
    while (label := label_next(user=bob, queue=queue)) is not None:
        seen.append(label.review_item_id)
        label_save(user=bob, label=label, value="pass")
    assert len(seen) == 10 == len(set(seen))


def test_an_item_gets_at_most_k_raters(alice, bob, victor, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="q", raters=2)
    for user in (alice, bob, victor):
        label_all(user, queue, ["pass"] * 3)
    # alice and bob took items 0-2; victor's went to the next ones.
    counts = [item.labels.count() for item in queue.items.order_by("position")]
    assert counts == [2, 2, 2, 1, 1, 1, 0, 0, 0, 0]
    assert all(item.taken == item.labels.count() for item in queue.items.all())


def test_an_unlabelled_item_is_handed_back_not_a_new_one(bob, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="q")
    first = label_next(user=bob, queue=queue)
    assert label_next(user=bob, queue=queue) == first
    assert ReviewLabel.objects.count() == 1


def test_only_named_reviewers_review_a_closed_queue(alice, victor, bob, dataset):
    queue = queue_create(
        user=bob, run=ended_run(dataset), name="q", reviewers=["victor"]
    )
    assert not queue.open_pool
    assert label_next(user=victor, queue=queue) is not None
    with pytest.raises(Forbidden):
        label_next(user=alice, queue=queue)


def test_changes_to_a_label_are_kept_with_who_and_when(victor, bob, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="q")
    label = label_next(user=victor, queue=queue)
    label_save(user=victor, label=label, value="pass")
    label_save(user=victor, label=label, value="fail", note="wrong sum")
    history = list(ReviewLabelChange.objects.filter(label=label).order_by("pk"))
    assert [(c.value, c.note, c.user) for c in history] == [
        ("pass", "", victor),
        ("fail", "wrong sum", victor),
    ]
    assert all(c.changed_at is not None for c in history)


def test_a_bad_value_is_refused_naming_the_field(victor_client, bob, dataset):
    queue = queue_create(
        user=bob, run=ended_run(dataset), name="q", rubric={"kind": "scale"}
    )
    label = label_next(user=queue.created_by, queue=queue)
    response = put(victor_client, queue, label.pk, value=3)
    assert response.status_code == 404  # another reviewer's label
    response = put(victor_client.__class__(), queue, label.pk, value=3)
    assert response.status_code == 401
    with pytest.raises(InvalidInput) as caught:
        label_save(user=bob, label=label, value=7)
    assert caught.value.field == "value"


def test_consensus_is_the_majority_with_ties_marked(alice, bob, victor, dataset):
    run = ended_run(dataset)
    queue = queue_create(user=bob, run=run, name="people", raters=3)
    label_all(alice, queue, ["pass", "fail"])
    label_all(bob, queue, ["pass", "pass"])
    label_all(victor, queue, ["fail"])
    scores = Score.objects.filter(result__run=run, scorer="human:people")
    by_index = {s.result.item_index: s for s in scores.select_related("result")}
    assert by_index[0].passed is True and by_index[0].value == pytest.approx(2 / 3)
    assert by_index[1].passed is None  # one pass, one fail
    assert by_index[1].reason.startswith("tie")
    assert set(by_index) == {0, 1}


def test_a_scale_consensus_is_the_mean(alice, bob, dataset):
    run = ended_run(dataset)
    queue = queue_create(
        user=bob, run=run, name="scale", raters=2,
        rubric={"kind": "scale", "pass_at": 4},
    )  # fmt: skip
    label_all(alice, queue, [5, 2])
    label_all(bob, queue, [4, 3])
    scores = dict(
        Score.objects.filter(result__run=run, scorer="human:scale").values_list(
            "result__item_index", "value"
        )
    )
    assert scores == {0: 4.5, 1: 2.5}


def test_consensus_shows_in_the_summary_and_the_export(alice, bob, client, dataset):
    run = ended_run(dataset)
    queue = queue_create(user=bob, run=run, name="people")
    label_all(alice, queue, ["pass", "fail", "pass", "pass"])
    run.refresh_from_db()
    summary = {s.scorer: s for s in run_summary(run=run).scorers}
    assert summary["human:people"].passed == 3
    assert summary["human:people"].not_scored == 6
    client.force_login(bob)
    export = client.get(f"/api/v1/runs/{run.pk}/export?format=csv")
    rows = list(
        csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode()))
    )
    assert [row["human:people.passed"] for row in rows[:5]] == [
        "true", "false", "true", "true", "",
    ]  # fmt: skip


def test_consensus_shows_in_the_results_filters(alice, bob, client, dataset):
    run = ended_run(dataset)
    queue = queue_create(user=bob, run=run, name="people")
    label_all(alice, queue, ["fail", "pass", "fail"])
    client.force_login(bob)
    response = client.get(
        f"/api/v1/runs/{run.pk}/results?scorer=human:people&verdict=failed"
    )
    assert response.status_code == 200, response.content
    assert [row["index"] for row in response.json()["items"]] == [0, 2]


def test_a_preference_is_stored_by_run_whatever_side_it_was_shown(alice, bob, dataset):
    run, other = ended_run(dataset, name="one"), ended_run(dataset, name="two")
    queue = queue_create(
        user=bob, run=run, other_run=other, name="pair", source="comparison"
    )
    ReviewItem.objects.filter(queue=queue, position=0).update(swapped=True)
    ReviewItem.objects.filter(queue=queue, position=1).update(swapped=False)
    label_all(alice, queue, ["left", "left"])
    stored = list(
        ReviewLabel.objects.order_by("review_item__position").values_list(
            "value", flat=True
        )
    )
    assert stored == ["b", "a"]
    mine = dict(
        Score.objects.filter(result__run=run, scorer="human:pair").values_list(
            "result__item_index", "passed"
        )
    )
    theirs = dict(
        Score.objects.filter(result__run=other, scorer="human:pair").values_list(
            "result__item_index", "passed"
        )
    )
    assert mine == {0: False, 1: True}
    assert theirs == {0: True, 1: False}


def test_the_label_matrix_is_items_by_raters_with_none_where_missing(
    alice, bob, victor, dataset
):
    queue = queue_create(user=bob, run=ended_run(dataset), name="m", raters=2)
    label_all(alice, queue, ["pass", "fail"])
    label_all(bob, queue, ["pass"])
    label_all(victor, queue, ["fail"])
    matrix = queue_label_matrix(queue=queue)
    assert matrix.raters == ["alice", "bob", "victor"]
    assert matrix.items == [0, 1]
    assert matrix.values == [["pass", "pass", None], ["fail", None, "fail"]]
    assert matrix.categories == ["pass", "fail"]


def test_the_matrix_api_is_for_editors(victor_client, bob_client, bob, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="m")
    assert victor_client.get(f"{API}/{queue.pk}/matrix").status_code == 403
    body = bob_client.get(f"{API}/{queue.pk}/matrix").json()
    assert body == {
        "kind": "pass_fail",
        "categories": ["pass", "fail"],
        "items": [],
        "raters": [],
        "values": [],
    }

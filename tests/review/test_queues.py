"""Review queues over each source: what they hold, and bad input refused by field."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from runs.analysis.clusters import run_clusters
from runs.errors import Conflict, Forbidden, InvalidInput
from runs.models import ReviewItem, ReviewQueue, Run, Score, ScoringPass
from runs.review.services import queue_create
from runs.review.sources import allocate
from tests.factories import arithmetic_items, make_dataset
from tests.review.builders import ended_run

API = "/api/v1/review-queues"


def positions(queue: ReviewQueue) -> list[int]:
    items = ReviewItem.objects.filter(queue=queue).order_by("position")
    return list(items.values_list("result__item_index", flat=True))


def post(client, **body):
    return client.post(API, json.dumps(body), content_type="application/json")


def test_a_queue_over_a_whole_run_holds_every_result_in_dataset_order(
    bob_client, dataset
):
    run = ended_run(dataset)
    response = post(bob_client, run=run.pk, name="all")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["scorer"] == "human:all"
    assert body["progress"] == {"items": 10, "complete": 0, "labels": 0, "mine": 0}
    assert positions(ReviewQueue.objects.get(pk=body["id"])) == list(range(10))


def test_a_queue_over_a_results_filter_holds_what_the_results_page_shows(bob, dataset):
    run = ended_run(dataset)
    queue = queue_create(
        user=bob, run=run, name="failed", source="filter",
        source_params={"scorer": "exact_match", "verdict": "failed"},
    )  # fmt: skip
    assert positions(queue) == [1, 3, 5, 7, 9]


def test_a_queue_over_a_failure_cluster_holds_the_cluster(bob, dataset):
    run = ended_run(dataset)
    cluster = run_clusters(run=run).failed_scores[0]
    queue = queue_create(
        user=bob, run=run, name="cluster", source="cluster",
        source_params={"cluster": cluster.key},
    )  # fmt: skip
    assert positions(queue) == [1, 3, 5, 7, 9]


def test_a_sample_is_stratified_by_verdict_and_reproducible_from_its_seed(bob, project):
    dataset = make_dataset(project, arithmetic_items(40))
    verdicts = [i < 30 for i in range(40)]  # 30 pass, 10 fail
    run = ended_run(dataset, passed=verdicts)
    queue = queue_create(
        user=bob, run=run, name="sample", source="sample",
        source_params={"size": 8, "scorer": "exact_match"},
    )  # fmt: skip
    picked = positions(queue)
    assert Counter(index < 30 for index in picked) == {True: 6, False: 2}
    seed = queue.source_params["seed"]
    again = queue_create(
        user=bob, run=run, name="again", source="sample",
        source_params={"size": 8, "seed": seed},
    )  # fmt: skip
    assert positions(again) == picked
    assert again.source_params["scorer"] == "exact_match"


def test_allocation_is_proportional_and_keeps_every_stratum() -> None:
    assert allocate({"passed": 90, "failed": 9, "errored": 1, "unscored": 0}, 10) == {
        "passed": 8,
        "failed": 1,
        "errored": 1,
        "unscored": 0,
    }
    assert sum(allocate({"passed": 3, "failed": 2}, 50).values()) == 5


def test_a_comparison_pairs_two_runs_outputs_with_sides_recorded(bob, dataset):
    run = ended_run(dataset, name="first")
    other = ended_run(dataset, name="second")
    queue = queue_create(
        user=bob, run=run, other_run=other, name="pair", source="comparison"
    )
    items = list(ReviewItem.objects.filter(queue=queue).select_related("result"))
    assert len(items) == 10
    assert {i.result.run_id for i in items} == {run.pk}
    assert {i.other_result.run_id for i in items} == {other.pk}
    assert all(i.result.item_id == i.other_result.item_id for i in items)
    assert queue.rubric["kind"] == "preference"
    for each in (run, other):
        each.refresh_from_db()
        assert "human:pair" in each.scorer_names


def test_a_comparison_across_datasets_is_refused_naming_the_field(bob, project):
    first = ended_run(make_dataset(project, arithmetic_items(3), name="a"))
    second = ended_run(make_dataset(project, arithmetic_items(3), name="b"))
    with pytest.raises(InvalidInput) as caught:
        queue_create(
            user=bob, run=first, other_run=second, name="x", source="comparison"
        )
    assert caught.value.field == "other_run"


def test_a_queue_lists_its_scorers_on_the_run_with_a_scoring_pass(bob, dataset):
    run = ended_run(dataset)
    queue_create(
        user=bob, run=run, name="graded", rubric={"kind": "scale",
        "criteria": ["accuracy", "tone"]},
    )  # fmt: skip
    run.refresh_from_db()
    assert run.scorer_names == [
        "exact_match",
        "human:graded",
        "human:graded/accuracy",
        "human:graded/tone",
    ]
    passes = ScoringPass.objects.filter(run=run).order_by("pk")
    assert [p.initial for p in passes] == [True, False]
    assert passes[1].scorer_names == run.human_scorers


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rubric": {"kind": "stars"}}, "rubric.kind"),
        ({"rubric": {"kind": "labels"}}, "rubric.labels"),
        ({"rubric": {"colour": 1}}, "rubric.colour"),
        ({"rubric": {"pass_at": 9}}, "rubric.pass_at"),
        ({"raters": 0}, "raters"),
        ({"reviewers": ["mallory"]}, "reviewers[0]"),
        (
            {"source": "filter", "source_params": {"status": "nope"}},
            "source_params.status",
        ),
        ({"source": "sample", "source_params": {"size": 0}}, "source_params.size"),
        ({"source": "cluster", "source_params": {}}, "source_params.cluster"),
        ({"source": "elsewhere"}, "source"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(
    bob_client, mallory, dataset, body, field
):
    run = ended_run(dataset)
    response = post(bob_client, run=run.pk, name="bad", **body)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert not ReviewQueue.objects.exists()
    run.refresh_from_db()
    assert run.human_scorers == []


def test_a_name_used_twice_in_a_project_is_409(bob, dataset):
    run = ended_run(dataset)
    queue_create(user=bob, run=run, name="twice")
    with pytest.raises(Conflict):
        queue_create(user=bob, run=run, name="twice")


def test_a_run_still_executing_cannot_be_reviewed(bob, dataset):
    run = ended_run(dataset)
    Run.objects.filter(pk=run.pk).update(status="running")
    run.refresh_from_db()
    with pytest.raises(Conflict):
        queue_create(user=bob, run=run, name="early")


def test_a_viewer_cannot_create_a_queue(victor, dataset):
    run = ended_run(dataset)
    with pytest.raises(Forbidden):
        queue_create(user=victor, run=run, name="viewer")


def test_deleting_a_queue_takes_its_scores_off_the_run(bob_client, bob, dataset):
    run = ended_run(dataset)
    queue = queue_create(user=bob, run=run, name="gone")
    Score.objects.create(result=run.results.first(), scorer="human:gone", value=1)
    response = bob_client.delete(f"{API}/{queue.pk}")
    assert response.status_code == 204
    run.refresh_from_db()
    assert run.human_scorers == []
    assert not Score.objects.filter(scorer="human:gone").exists()

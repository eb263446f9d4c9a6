"""A queue's consensus is read as any scorer: comparisons and clusters too."""

from __future__ import annotations

from runs.analysis.clusters import run_clusters
from runs.review.services import label_next, label_save, queue_create
from tests.review.builders import ended_run


def label_all(user, queue, values) -> None:
    for value in values:
        label = label_next(user=user, queue=queue)
        assert label is not None
        label_save(user=user, label=label, value=value)


def test_a_comparison_queue_is_compared_between_its_two_runs(
    alice, bob, bob_client, dataset
):
    run, other = ended_run(dataset, name="one"), ended_run(dataset, name="two")
    queue = queue_create(
        user=bob, run=run, other_run=other, name="pair", source="comparison"
    )
    label_all(alice, queue, ["a", "a", "a", "b"])
    response = bob_client.get(
        f"/api/v1/compare?baseline={run.pk}&candidates={other.pk}"
    )
    assert response.status_code == 200, response.content
    compared = {row["scorer"]: row for row in response.json()["scorers"]}
    # Preferred three times out of four: each a pass here, a fail there.
    assert compared["human:pair"]["regressions"] == 3
    assert compared["human:pair"]["both_passed"] == 0


def test_a_failing_consensus_forms_a_cluster_of_the_run(alice, bob, dataset):
    run = ended_run(dataset)
    queue = queue_create(user=bob, run=run, name="people")
    label_all(alice, queue, ["fail", "pass", "fail"])
    run.refresh_from_db()
    clusters = {
        c.key.rpartition(":")[0]: c for c in run_clusters(run=run).failed_scores
    }
    assert clusters["score:human:people"].count == 2

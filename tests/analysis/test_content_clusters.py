"""Failure clusters by content: a run's failing items grouped by what they say."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from runs.analysis.content_clusters import (
    content_clustering,
    content_members,
    run_content_clusters,
)
from runs.errors import InvalidInput
from runs.models import Project, Result, RunContentClusters, Score
from runs.records.versions import results_changed
from tests.content_runs import (
    CAKES,
    ODD,
    PASS,
    TIMEOUT,
    TRAINS,
    topic_dataset,
    topic_run,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def topics(project: Project):
    return topic_dataset(project)


def _ids(run, prefix: str) -> set[int]:
    return set(
        Result.objects.filter(
            run=run, item__external_id__startswith=prefix
        ).values_list("pk", flat=True)
    )


def test_two_topics_of_failure_are_two_clusters(topics) -> None:
    run = topic_run(topics)
    found = run_content_clusters(run=run, items_per_cluster=100)
    assert found.failing == TRAINS + CAKES + len(ODD)
    trains, cakes = found.clusters
    assert {item.result_id for item in trains.items} == _ids(run, "train")
    assert {item.result_id for item in cakes.items} == _ids(run, "cake")
    assert (trains.count, cakes.count) == (TRAINS, CAKES)


def test_clusters_are_named_by_their_distinctive_terms(topics) -> None:
    trains, cakes = run_content_clusters(run=topic_run(topics)).clusters
    assert "train" in trains.terms
    assert "cake" in cakes.terms
    assert not set(trains.terms) & set(cakes.terms)
    assert trains.name == " · ".join(trains.terms)


def test_items_that_fit_no_cluster_are_counted_unclustered(topics) -> None:
    run = topic_run(topics)
    found = run_content_clusters(run=run)
    assert found.unclustered is not None
    assert found.unclustered.count == len(ODD)
    assert {i.result_id for i in found.unclustered.items} == _ids(run, "odd")


def test_passing_and_stopped_results_are_not_clustered(topics) -> None:
    stopped = {"error": ("cancelled", "Cancelled", "stopped"), "status": "cancelled"}
    run = topic_run(topics, cakes=stopped)
    found = run_content_clusters(run=run)
    assert found.failing == TRAINS + len(ODD)
    assert [c.count for c in found.clusters] == [TRAINS]


def test_computed_once_per_results_version(topics) -> None:
    run = topic_run(topics)
    first = content_clustering(run)
    stored = RunContentClusters.objects.get(run=run)
    cache.clear()
    assert content_clustering(run) == first
    assert RunContentClusters.objects.get(run=run).computed_at == stored.computed_at
    results_changed(run)
    content_clustering(run)
    assert RunContentClusters.objects.get(run=run).computed_at > stored.computed_at


def test_a_second_read_makes_no_query_once_cached(
    topics, django_assert_num_queries
) -> None:
    run = topic_run(topics)
    run.project  # noqa: B018 (the project is read once with the run)
    content_clustering(run)
    with django_assert_num_queries(0):
        content_clustering(run)


def test_a_key_names_its_results_until_the_results_change(topics) -> None:
    run = topic_run(topics)
    trains = run_content_clusters(run=run).clusters[0]
    assert set(content_members(run=run, key=trains.key)) == _ids(run, "train")
    results_changed(run)
    # The same results cluster alike: the key still holds.
    assert set(content_members(run=run, key=trains.key)) == _ids(run, "train")
    with pytest.raises(InvalidInput) as refused:
        content_members(run=run, key="content:0123456789ab")
    assert refused.value.field == "cluster"


def test_errors_only_clusters_may_be_retried(topics) -> None:
    run = topic_run(topics, cakes=TIMEOUT)
    trains, cakes = sorted(
        run_content_clusters(run=run).clusters, key=lambda c: c.count, reverse=True
    )
    assert (trains.retryable, trains.errors_only) == (0, False)
    assert (cakes.retryable, cakes.errors_only) == (CAKES, True)


def test_against_a_baseline_a_cluster_that_passes_now_vanished(project, topics) -> None:
    baseline = topic_run(topics)
    run = topic_run(topics, cakes=PASS)
    found = run_content_clusters(run=run, baseline=baseline)
    assert sorted((c.change, c.count, c.baseline_count) for c in found.clusters) == [
        ("same", TRAINS, TRAINS),
        ("vanished", 0, CAKES),
    ]
    [gone] = [c for c in found.clusters if c.change == "vanished"]
    cakes = run_content_clusters(run=baseline).clusters[1]
    assert (gone.key, gone.name) == (cakes.key, cakes.name)
    assert [(m.to, m.count) for m in gone.moves] == [("passed", CAKES)]
    assert found.unclustered is not None and found.unclustered.change == "same"


def test_against_a_baseline_a_new_topic_of_failure_is_new(topics) -> None:
    baseline = topic_run(topics, cakes=PASS)
    run = topic_run(topics)
    found = run_content_clusters(run=run, baseline=baseline)
    assert sorted((c.change, c.count) for c in found.clusters) == [
        ("new", CAKES),
        ("same", TRAINS),
    ]
    trains = next(c for c in found.clusters if c.count == TRAINS)
    assert trains.jaccard == 1.0


def test_a_run_without_failures_has_no_clusters(topics) -> None:
    run = topic_run(topics, cakes=PASS, trains=PASS)
    Result.objects.filter(run=run, item__external_id__startswith="odd").delete()
    results_changed(run)
    found = run_content_clusters(run=run)
    assert (found.failing, found.clusters) == (0, [])
    assert found.unclustered is not None and found.unclustered.count == 0


def test_against_a_baseline_a_shrunk_cluster_says_where_its_items_went(
    topics,
) -> None:
    baseline = topic_run(topics)
    run = topic_run(topics)
    fixed = Result.objects.filter(
        run=run, item__external_id__in=[f"cake{i}" for i in range(5)]
    )
    fixed.update(status="succeeded")
    Score.objects.filter(result__in=fixed).update(
        passed=True, value=1.0, reason="", reason_signature=""
    )
    results_changed(run)
    found = run_content_clusters(run=run, baseline=baseline)
    shrunk = next(c for c in found.clusters if c.change == "shrunk")
    assert (shrunk.count, shrunk.baseline_count, shrunk.fewer) == (4, CAKES, 5)
    assert shrunk.jaccard == pytest.approx(4 / CAKES, abs=1e-4)
    assert [(m.to, m.count) for m in shrunk.moves] == [("passed", 5)]

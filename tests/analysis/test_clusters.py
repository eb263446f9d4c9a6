"""Failure clusters of a run, and how they moved against a baseline run."""

from __future__ import annotations

import pytest

from runs.analysis import clusters as clusters_module
from runs.analysis.cluster_keys import (
    cluster_filter,
    parse_cluster_key,
    score_cluster_key,
)
from runs.analysis.clusters import Cluster, ComparedCluster, run_clusters
from runs.analysis.content_clusters import ContentCluster
from runs.errors import InvalidInput
from runs.models import Dataset, Project, Result, Run, Score
from runs.records.signatures import signatures_recompute
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes

CONTEXT = (
    "HTTP 400 Bad Request: maximum context length is 8192 tokens, you requested "
    "{n} tokens (request id req_{rid})"
)
RATE = "HTTP 429: rate limited at {when}, retry in {s}s"


def context_error(n: int) -> dict:
    message = CONTEXT.format(n=9000 + n * 37, rid=f"{n:04d}ab{n * 7919:08x}")
    return {"error": ("permanent", "HTTP400", message)}


def rate_error(n: int) -> dict:
    message = RATE.format(when=f"2026-11-22T16:{n:02d}:13Z", s=n + 1)
    return {"error": ("transient", "HTTP429", message)}


def verdict(passed: bool, reason: str = "") -> dict:
    return {"scores": [("exact_match", passed, reason)]}


@pytest.fixture
def big_dataset(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(12))


@pytest.fixture
def run(big_dataset: Dataset) -> Run:
    outcomes = [context_error(n) for n in range(5)]
    outcomes += [rate_error(n) for n in range(2)]
    outcomes += [verdict(False, f"expected '{n}', got '{n + 1}'") for n in range(3)]
    outcomes += [verdict(True, "ok"), verdict(True, "ok")]
    return store_outcomes(echo_run(big_dataset), outcomes)


def test_errors_that_differ_only_in_ids_and_counts_form_one_cluster(run: Run) -> None:
    clusters = run_clusters(run=run)
    assert [(c.error_type, c.count) for c in clusters.errors] == [
        ("HTTP400", 5),
        ("HTTP429", 2),
    ]
    assert clusters.error_clusters == 2


def test_a_cluster_has_its_kind_example_share_and_first_items(run: Run) -> None:
    cluster = run_clusters(run=run, items_per_cluster=3).errors[0]
    first = Result.objects.get(run=run, item_index=0)
    assert cluster.kind == "permanent"
    assert cluster.key == cluster.signature == first.error_signature
    assert cluster.example == first.error_message
    assert cluster.pattern == first.error_pattern
    assert "<n>" in cluster.pattern and "req_<id>" in cluster.pattern
    assert cluster.share == pytest.approx(5 / 12)
    assert [item.index for item in cluster.items] == [0, 1, 2]
    assert cluster.items[0].result_id == first.pk
    assert cluster.items[0].external_id == "q0"


def test_failing_scores_are_grouped_by_scorer_and_reason(run: Run) -> None:
    clusters = run_clusters(run=run).failed_scores
    assert len(clusters) == 1
    cluster = clusters[0]
    assert (cluster.scorer, cluster.kind, cluster.count) == ("exact_match", "failed", 3)
    assert cluster.key == score_cluster_key("exact_match", cluster.signature)
    assert cluster.example == "expected '0', got '1'"
    assert cluster.pattern == "expected <str>, got <str>"
    assert [item.index for item in cluster.items] == [7, 8, 9]


def test_scorer_errors_form_their_own_cluster(big_dataset: Dataset) -> None:
    outcomes = [
        {"scores": [("exact_match", None, "", "TimeoutError: over 5 s")]},
        {"scores": [("exact_match", None, "", "TimeoutError: over 9 s")]},
        verdict(False, "no"),
    ]
    run = store_outcomes(echo_run(big_dataset), outcomes)
    clusters = run_clusters(run=run).failed_scores
    assert [(c.kind, c.count) for c in clusters] == [("error", 2), ("failed", 1)]


def test_cluster_filter_selects_exactly_the_results_of_a_cluster(run: Run) -> None:
    clusters = run_clusters(run=run)
    for cluster in clusters.errors + clusters.failed_scores:
        members = Result.objects.filter(run=run).filter(cluster_filter(cluster.key))
        assert members.count() == cluster.count


def test_cluster_filter_of_a_score_cluster_ignores_other_scorers(run: Run) -> None:
    key = run_clusters(run=run).failed_scores[0].key
    scorer, signature = parse_cluster_key(key)
    other = score_cluster_key("includes", signature)
    assert scorer == "exact_match"
    assert not Result.objects.filter(run=run).filter(cluster_filter(other)).exists()


@pytest.mark.parametrize(
    "key", ["", "nothex", "score:abc", "score::0123456789abcdef", "0123456789ABCDEF"]
)
def test_a_malformed_cluster_key_is_bad_input(key: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        cluster_filter(key)
    assert caught.value.field == "cluster"


def test_scorer_names_with_colons_survive_the_key() -> None:
    key = score_cluster_key("judge:strict", "0123456789abcdef")
    assert parse_cluster_key(key) == ("judge:strict", "0123456789abcdef")


def test_items_per_cluster_bounds_the_items(run: Run) -> None:
    clusters = run_clusters(run=run, items_per_cluster=1)
    assert [len(c.items) for c in clusters.errors] == [1, 1]
    assert len(clusters.failed_scores[0].items) == 1


def test_without_a_baseline_there_is_no_change(run: Run) -> None:
    cluster = run_clusters(run=run).errors[0]
    assert cluster.change is None and cluster.baseline_count is None


def test_against_a_baseline_each_cluster_says_how_it_moved(
    big_dataset: Dataset, run: Run
) -> None:
    # The baseline: 3 context errors (now 5: grown), 2 rate errors (now 2:
    # same), a malformed-response error (now none: vanished), 5 failed
    # verdicts (now 3: shrunk); the candidate's ... none is new here.
    outcomes = [context_error(n + 40) for n in range(3)]
    outcomes += [rate_error(n + 20) for n in range(2)]
    outcomes += [{"error": ("permanent", "MalformedResponse", "no content (7 B)")}]
    outcomes += [verdict(False, f"expected '{n}', got 'x'") for n in range(5)]
    baseline = store_outcomes(echo_run(big_dataset), outcomes)

    clusters = run_clusters(run=run, baseline=baseline)
    moved = [
        (c.error_type, c.count, c.baseline_count, c.change) for c in clusters.errors
    ]
    assert moved == [
        ("HTTP400", 5, 3, "grown"),
        ("HTTP429", 2, 2, "same"),
        ("MalformedResponse", 0, 1, "vanished"),
    ]
    vanished = clusters.errors[-1]
    assert vanished.example == "no content (7 B)" and vanished.items == []
    [score] = clusters.failed_scores
    assert (score.count, score.baseline_count, score.change) == (3, 5, "shrunk")


def test_a_cluster_absent_from_the_baseline_is_new(
    big_dataset: Dataset, run: Run
) -> None:
    baseline = store_outcomes(echo_run(big_dataset), [verdict(True)] * 12)
    clusters = run_clusters(run=run, baseline=baseline)
    assert {c.change for c in clusters.errors + clusters.failed_scores} == {"new"}
    assert all(c.baseline_count == 0 for c in clusters.errors)


def test_a_run_without_failures_has_no_clusters(big_dataset: Dataset) -> None:
    run = store_outcomes(echo_run(big_dataset), [verdict(True)] * 4)
    clusters = run_clusters(run=run)
    assert clusters.errors == [] and clusters.failed_scores == []
    assert clusters.results == 4


def test_recompute_gives_stored_rows_the_signatures_of_new_ones(run: Run) -> None:
    expected_results = dict(
        Result.objects.filter(run=run).values_list("pk", "error_signature")
    )
    expected_scores = dict(Score.objects.values_list("pk", "reason_signature"))
    Result.objects.exclude(status="succeeded").update(
        error_signature="stale", error_pattern=""
    )
    Score.objects.update(reason_signature="")

    updated = signatures_recompute(result_model=Result, score_model=Score)

    assert updated == (7, 3)
    assert (
        dict(Result.objects.filter(run=run).values_list("pk", "error_signature"))
        == expected_results
    )
    assert dict(Score.objects.values_list("pk", "reason_signature")) == expected_scores
    assert not Result.objects.filter(error_pattern="", status="failed").exists()


def test_recompute_leaves_successes_without_a_signature(run: Run) -> None:
    signatures_recompute(result_model=Result, score_model=Score)
    succeeded = Result.objects.filter(run=run, status="succeeded")
    assert set(succeeded.values_list("error_signature", flat=True)) == {""}


def test_first_items_are_the_same_however_they_are_read(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Big clusters are read in dataset order, small ones ranked in one query.
    seen = []
    for dense in (1, 10**9):
        monkeypatch.setattr(clusters_module, "DENSE", dense)
        [cluster] = run_clusters(run=run, items_per_cluster=2).failed_scores
        seen.append((cluster.example, cluster.kind, cluster.items))
    assert seen[0] == seen[1]
    assert [item.index for item in seen[0][2]] == [7, 8]


@pytest.mark.parametrize(
    "cluster",
    [
        Cluster(
            key="E1",
            signature="E1",
            kind="permanent",
            error_type="ValueError",
            pattern="bad",
            example="bad",
            count=2,
            share=None,
        ),
        ContentCluster(
            key="content:1",
            terms=["x"],
            title="",
            unclustered=False,
            count=2,
            retryable=0,
            share=None,
        ),
    ],
)
def test_a_cluster_of_either_kind_says_how_many_fewer_than_the_baselines(
    cluster: ComparedCluster,
) -> None:
    assert cluster.fewer == 0  # no baseline
    cluster.baseline_count = 5
    assert cluster.fewer == 3
    cluster.baseline_count = 1  # grown: none fewer
    assert cluster.fewer == 0

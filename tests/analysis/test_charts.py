"""The charts' data, binned in the database, checked against numpy."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from runs.analysis.charts import (
    LATENCY_BINS,
    SCORE_BINS,
    completion_timeline,
    latency_histogram,
    pass_rate_chart,
    score_distributions,
)
from runs.analysis.summary import run_summary
from runs.models import Dataset, Project, Result, RunStatus
from tests.factories import arithmetic_items, make_dataset
from tests.stored_runs import stored_run


@pytest.fixture
def big_dataset(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(80), name="big")


def test_latency_histogram_matches_numpy(big_dataset: Dataset) -> None:
    run, stored = stored_run(big_dataset, epochs=2, seed=30)
    latencies = [s.latency_ms for s in stored if s.status == Result.Status.SUCCEEDED]
    counts, edges = np.histogram(latencies, bins=LATENCY_BINS)

    chart = latency_histogram(run=run, summary=run_summary(run=run))

    assert chart["counts"] == counts.tolist()
    assert chart["bins"] == pytest.approx(edges[:-1].tolist())
    assert chart["width"] == pytest.approx(edges[1] - edges[0])


def test_continuous_scores_are_binned_like_numpy(big_dataset: Dataset) -> None:
    run, stored = stored_run(big_dataset, epochs=2, seed=31)
    values = [s.scores["includes"][0] for s in stored if "includes" in s.scores]
    counts, edges = np.histogram(values, bins=SCORE_BINS)

    chart = {
        c["scorer"]: c
        for c in score_distributions(run=run, summary=run_summary(run=run))
    }["includes"]

    assert chart["counts"] == counts.tolist()
    assert chart["bins"] == pytest.approx(edges[:-1].tolist())


def test_scores_with_few_values_are_counted_per_value(big_dataset: Dataset) -> None:
    run, stored = stored_run(big_dataset, seed=32)
    values = Counter(
        s.scores["exact_match"][0]
        for s in stored
        if s.scores.get("exact_match", (None,))[0] is not None
    )

    chart = {
        c["scorer"]: c
        for c in score_distributions(run=run, summary=run_summary(run=run))
    }["exact_match"]

    assert dict(zip(chart["values"], chart["counts"], strict=True)) == values


def test_timeline_counts_each_result_in_the_bucket_it_finished(
    big_dataset: Dataset,
) -> None:
    run, stored = stored_run(big_dataset, epochs=2, seed=33)

    chart = completion_timeline(run=run, summary=run_summary(run=run))

    width = chart["width_seconds"]
    offsets = [(s.finished_at - run.started_at).total_seconds() for s in stored]
    buckets = np.floor(np.array(offsets) / width).astype(int)
    retried = np.array([s.attempts > 1 for s in stored])
    errored = np.array([s.status != Result.Status.SUCCEEDED for s in stored])
    size = len(chart["finished"])
    assert chart["finished"] == np.bincount(buckets, minlength=size).tolist()
    assert (
        chart["retried"]
        == np.bincount(buckets, weights=retried, minlength=size).astype(int).tolist()
    )
    assert (
        chart["errored"]
        == np.bincount(buckets, weights=errored, minlength=size).astype(int).tolist()
    )
    assert chart["offsets"][1] == width


def test_charts_of_a_run_without_results_are_empty(dataset: Dataset) -> None:
    run, _ = stored_run(dataset, missing=1.0, status=RunStatus.PENDING)

    assert latency_histogram(run=run, summary=run_summary(run=run)) is None
    assert completion_timeline(run=run, summary=run_summary(run=run)) is None
    assert score_distributions(run=run, summary=run_summary(run=run)) == []


def test_pass_rate_chart_carries_the_interval(dataset: Dataset) -> None:
    run, _ = stored_run(dataset, seed=34)
    summary = run_summary(run=run)

    bars = pass_rate_chart(summary)

    first = summary.scorers[0]
    assert bars[0]["rate"] == first.pass_rate
    assert (bars[0]["low"], bars[0]["high"]) == first.pass_rate_ci

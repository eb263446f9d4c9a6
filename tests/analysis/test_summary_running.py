"""A running run's summary while its batches land: never more passes than
trials, nor more latencies than answered results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from runs.analysis import summary
from runs.models import Project, Result, Run, RunStatus
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes

PASSED = {"scores": [("exact_match", True, "")]}


@pytest.fixture
def running(project: Project) -> Run:
    run = echo_run(make_dataset(project, arithmetic_items(20), name="live"))
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    run = store_outcomes(run, [PASSED] * 5)
    # Figures read from the score rows, as of a run whose tallies never
    # began: a going run's tallies are read in one statement, results and
    # scores together (tests/analysis/test_score_tallies.py).
    Run.objects.filter(pk=run.pk).update(tally_revision=None)
    run.refresh_from_db()
    return run


def batch_stored_at_score_read(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor stores 5 more passing results as the scores are read."""
    read = summary._score_rows
    landed: list[bool] = []

    def score_rows(of: Run) -> Any:
        if not landed:
            landed.append(True)
            store_outcomes(Run.objects.get(pk=run.pk), [PASSED] * 5, offset=5)
        return read(of)

    monkeypatch.setattr(summary, "_score_rows", score_rows)


@pytest.mark.parametrize(
    "figures",
    [
        lambda run: summary.run_summary(run=run).scorers,
        lambda run: summary.run_scorer_summaries(run=run),
    ],
    ids=["summary", "live scorer figures"],
)
def test_a_batch_stored_meanwhile_never_gives_more_passes_than_trials(
    running: Run,
    monkeypatch: pytest.MonkeyPatch,
    figures: Callable[[Run], list[summary.ScorerSummary]],
) -> None:
    batch_stored_at_score_read(running, monkeypatch)

    (scorer,) = figures(running)

    # Counted before the scores, the results were 5 for 10 passes: a pass
    # rate of 2 and a Wilson interval of a negative variance (ValueError).
    assert scorer.passed == scorer.results == 10
    assert scorer.pass_rate == 1.0
    assert scorer.pass_rate_ci is not None and scorer.pass_rate_ci[1] == 1.0


def test_a_batch_stored_meanwhile_never_gives_more_latencies_than_answers(
    running: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor stores 5 more answered results (with their latencies)
    just after the summary counted the run's results by status."""
    Result.objects.filter(run=running).update(latency_ms=10.0, time_to_result_ms=12.0)
    totals = summary._totals
    landed: list[bool] = []

    def counted_then_stored(run: Run) -> Any:
        found = totals(run)
        if not landed:
            landed.append(True)
            store_outcomes(Run.objects.get(pk=running.pk), [PASSED] * 5, offset=5)
            Result.objects.filter(run=running, latency_ms__isnull=True).update(
                latency_ms=20.0, time_to_result_ms=25.0
            )
        return found

    monkeypatch.setattr(summary, "_totals", counted_then_stored)

    figures = summary.run_summary(run=running)

    # With the (run, status, latency_ms) index both counts came from one
    # aggregate: latency_count could never exceed the answered results it is
    # "of" (the page shows both). Read after the counts, it was 10 against 5.
    assert figures.latency_count <= figures.counts["succeeded"]
    assert figures.time_to_result_count <= figures.counts["succeeded"]

"""A running run's summary while its batches land: never more passes than trials."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from runs.analysis import summary
from runs.models import Project, Run, RunStatus
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

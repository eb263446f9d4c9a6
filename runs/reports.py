"""Figures about runs that the API and the command line report."""

from __future__ import annotations

from runs.models import Run
from runs.selectors import run_scorer_summaries


def run_score_means(run: Run) -> dict[str, float | None]:
    """Mean score value per scorer, in the run's scorer order.

    Errored scores have no value and are left out of the mean; a scorer with
    no value at all (yet) maps to None.
    """
    return {summary.scorer: summary.mean for summary in run_scorer_summaries(run=run)}

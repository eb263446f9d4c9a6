"""Reads of a run's scoring passes: the list, and the run page's section of them."""

from __future__ import annotations

from typing import Any

from runs.analysis.figures import run_figures
from runs.analysis.summary import run_scorer_summaries_cached
from runs.models import Run, ScoringPass


def initial_pass(run: Run) -> ScoringPass:
    """The run's own execution as a scoring pass (unsaved)."""
    final = run.is_final
    return ScoringPass(
        run=run,
        initial=True,
        scorers=run.scorers,
        status=ScoringPass.Status.COMPLETED if final else ScoringPass.Status.RUNNING,
        error=run.error if final else "",
        total=run.succeeded,
        scored=run.succeeded,
        # From the run's figures (stored, or cached under its results_version):
        # the run page shows this pass on every view of a run never re-scored.
        errored=sum(
            s.errored
            for s in (
                run_figures(run=run)[0].scorers
                if final
                else run_scorer_summaries_cached(run=run)
            )
        ),
        user=run.created_by,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
    )


def scoring_passes(*, run: Run) -> list[ScoringPass]:
    """The run's scoring passes, oldest first; its own execution is the first."""
    stored = list(ScoringPass.objects.filter(run=run).select_related("user"))
    return stored or [initial_pass(run)]


def scoring_section(*, run: Run, overview: Any) -> dict[str, Any]:
    """What the run page's section of scoring passes shows."""
    passes = scoring_passes(run=run)
    return {
        "run": run,
        "overview": overview,
        "passes": passes,
        # A re-score under way; the run's own execution (its first pass) is
        # followed live by the run page, which never reloads for it.
        "passes_active": any(
            p.active and not p.stale and not p.initial for p in passes
        ),
    }

"""Per-scorer figures of a run: mean value, passes and errors."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import Avg, Count, Q

from runs.models import Run, Score

CACHE_SECONDS = 600


@dataclass(frozen=True, slots=True)
class ScorerSummary:
    scorer: str
    mean: float | None
    scored: int
    passed: int
    errors: int


def run_scorer_summaries(*, run: Run) -> list[ScorerSummary]:
    """Mean value, passes and errors per scorer, in the run's scorer order."""
    rows = {
        row["scorer"]: row
        for row in Score.objects.filter(result__run=run)
        .values("scorer")
        .annotate(
            mean=Avg("value"),
            scored=Count("id", filter=Q(value__isnull=False)),
            passed=Count("id", filter=Q(passed=True)),
            errors=Count("id", filter=~Q(error="")),
        )
    }
    names = [spec.get("name") or spec.get("kind") for spec in run.scorers]
    names += sorted(set(rows) - set(names))
    return [
        ScorerSummary(
            scorer=name,
            mean=rows.get(name, {}).get("mean"),
            scored=rows.get(name, {}).get("scored", 0),
            passed=rows.get(name, {}).get("passed", 0),
            errors=rows.get(name, {}).get("errors", 0),
        )
        for name in names
    ]


def run_scorer_summaries_cached(*, run: Run) -> list[ScorerSummary]:
    """``run_scorer_summaries``, kept under the run's ``results_version``.

    The key changes whenever a score is stored, so a cached figure is never
    stale; a finished run is aggregated once instead of on every view.
    """
    key = f"run-scorers:{run.results_version}"
    summaries = cache.get(key)
    if summaries is None:
        summaries = run_scorer_summaries(run=run)
        cache.set(key, summaries, CACHE_SECONDS)
    return summaries


def run_score_means(run: Run) -> dict[str, float | None]:
    """Mean score value per scorer, in the run's scorer order.

    Errored scores have no value and are left out of the mean; a scorer with
    no value at all (yet) maps to None.
    """
    summaries = run_scorer_summaries_cached(run=run)
    return {summary.scorer: summary.mean for summary in summaries}

"""Reads of saved evaluations: lists, one of them, its runs as a trend."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import QuerySet

from runs.analysis.compare import compare_runs_cached
from runs.analysis.figures import run_figures
from runs.errors import DomainError, InvalidInput
from runs.estimates.services import run_estimate
from runs.evaluations.schedules import next_tick
from runs.evaluations.services import (
    BASELINE_STATUSES,
    evaluation_baseline,
    evaluation_dataset,
)
from runs.models import Evaluation, Run, Schedule, ScheduleTick
from runs.results.cost_estimate import Estimate
from runs.web.selectors import row_get, visible_rows

logger = logging.getLogger(__name__)

TREND_RUNS = 30
TICKS_SHOWN = 20


def evaluation_list(
    *, user: User, project_id: int | None = None
) -> QuerySet[Evaluation]:
    rows = visible_rows(Evaluation, user=user, project_id=project_id)
    return rows.select_related("project", "dataset", "target").prefetch_related(
        "schedules", "channels"
    )


def evaluation_get(*, user: User, evaluation_id: int) -> Evaluation:
    return row_get(evaluation_list(user=user), pk=evaluation_id, noun="evaluation")


def schedule_get(*, evaluation: Evaluation, schedule_id: int) -> Schedule:
    schedules = Schedule.objects.filter(evaluation=evaluation)
    return row_get(schedules, pk=schedule_id, noun="schedule")


def evaluation_runs(*, evaluation: Evaluation, limit: int = 50) -> list[Run]:
    """Its latest runs, newest first."""
    runs = Run.objects.filter(evaluation=evaluation).select_related("schedule")
    return list(runs.order_by("-created_at", "-pk")[:limit])


def evaluation_ticks(*, evaluation: Evaluation) -> list[ScheduleTick]:
    ticks = ScheduleTick.objects.filter(schedule__evaluation=evaluation)
    return list(ticks.select_related("schedule")[:TICKS_SHOWN])


@dataclass(frozen=True, slots=True)
class TrendPoint:
    run: Run
    pass_rate: float | None
    low: float | None
    high: float | None
    baseline: int | None
    verdict: str | None  # better, worse, no_significant_difference; None: none
    below_floor: bool


@dataclass(slots=True)
class ScorerTrend:
    scorer: str
    floor: float | None
    points: list[TrendPoint] = field(default_factory=list)

    @property
    def chart(self) -> list[dict[str, float | str | None]]:
        """The points laid out in a 100 x 40 box (pass rate 1 at the top)."""
        count = len(self.points)
        step = 100 / max(count - 1, 1)
        out = []
        for i, point in enumerate(self.points):
            if point.pass_rate is None:
                continue
            out.append(
                {
                    "x": round(i * step if count > 1 else 50, 2),
                    "y": round(40 * (1 - point.pass_rate), 2),
                    "low": None
                    if point.low is None
                    else round(40 * (1 - point.low), 2),
                    "high": None
                    if point.high is None
                    else round(40 * (1 - point.high), 2),
                    "verdict": point.verdict or "",
                    "run": point.run.pk,
                }
            )
        return out

    @property
    def line(self) -> str:
        return " ".join(f"{p['x']},{p['y']}" for p in self.chart)

    @property
    def floor_y(self) -> float | None:
        return None if self.floor is None else round(40 * (1 - self.floor), 2)


def _verdicts(baseline: Run | None, run: Run) -> dict[str, str]:
    """Each shared scorer's verdict of ``run`` against ``baseline`` (the
    comparison page's), or none when the two cannot be compared."""
    if baseline is None or baseline.status not in BASELINE_STATUSES:
        return {}
    try:
        comparison = compare_runs_cached(baseline=baseline, candidates=[run])
    except DomainError as exc:  # another dataset, no shared scorer...
        logger.info("run %s against %s: %s", run.pk, baseline.pk, exc)
        return {}
    return {row.scorer: row.verdict for row in comparison.scorers}


def evaluation_trend(
    *, evaluation: Evaluation, limit: int = TREND_RUNS
) -> list[ScorerTrend]:
    """Its ended runs, oldest first, as one trend per scorer: the pass rate
    and its interval (the run's stored figures) and the verdict against the
    run's baseline."""
    runs = list(
        Run.objects.filter(evaluation=evaluation, status__in=BASELINE_STATUSES)
        .select_related("dataset")
        .order_by("-created_at", "-pk")[:limit]
    )
    runs.reverse()
    floors = evaluation.pass_rate_floors or {}
    trends: dict[str, ScorerTrend] = {}
    for spec in evaluation.scorers:
        name = spec["name"]
        trends[name] = ScorerTrend(name, floors.get(name))
    for position, run in enumerate(runs):
        previous = evaluation.baseline_policy == Evaluation.BaselinePolicy.PREVIOUS
        if previous and position:
            baseline: Run | None = runs[position - 1]  # what the query would say
        else:
            baseline = evaluation_baseline(evaluation, run)
        verdicts = _verdicts(baseline, run)
        summary, _charts = run_figures(run=run)
        for scorer in summary.scorers:
            trend = trends.setdefault(scorer.scorer, ScorerTrend(scorer.scorer, None))
            low, high = scorer.pass_rate_ci or (None, None)
            rate = scorer.pass_rate
            trend.points.append(
                TrendPoint(
                    run=run,
                    pass_rate=rate,
                    low=low,
                    high=high,
                    baseline=baseline.pk if baseline is not None else None,
                    verdict=verdicts.get(scorer.scorer),
                    below_floor=(
                        trend.floor is not None
                        and rate is not None
                        and rate < trend.floor
                    ),
                )
            )
    return list(trends.values())


def schedule_next_ticks(
    schedules: list[Schedule], *, now: datetime
) -> list[tuple[Schedule, datetime]]:
    """Each schedule with its next tick after now."""
    return [(s, next_tick(s, after=max(now, s.last_tick_at))) for s in schedules]


@dataclass(frozen=True, slots=True)
class NextEstimate:
    """What the evaluation's next run would cost, or why there is no figure."""

    estimate: Estimate | None
    problem: str = ""


def evaluation_next_estimate(*, user: User, evaluation: Evaluation) -> NextEstimate:
    """The cost estimate of its next run (``run_estimate``): its target, its
    dataset version of now, its scorers and options."""
    target = evaluation.target
    if target is None and not evaluation.target_kind:
        return NextEstimate(None, "its target was deleted: choose another")
    try:
        found = run_estimate(
            user=user,
            dataset=evaluation_dataset(evaluation),
            target=target,
            target_kind=evaluation.target_kind or None,
            target_config=evaluation.target_config or None,
            scorers=evaluation.scorers,
            options=evaluation.options,
        )
    except InvalidInput as exc:  # a plug-in or option since changed
        return NextEstimate(None, str(exc))
    return NextEstimate(found)

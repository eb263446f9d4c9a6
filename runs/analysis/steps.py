"""How a run's agents got there: steps and tool calls per result, tool error
rates per tool, and tokens and cost per kind of step, aggregated in the
database.

Per result means per (item, epoch): each stored result of the run counts,
those without a trajectory as 0 steps. Percentiles follow numpy's linear
definition, read from a histogram the database returns (one row per
distinct count), never from every row. A tool call failed when its step
has an error (or an error type).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Count, Q, Sum

from runs.analysis import stats
from runs.models import Result, Run, Step

STEP_PERCENTILES = {"p50": 0.50, "p90": 0.90}


@dataclass(frozen=True, slots=True)
class ToolFigures:
    tool: str
    calls: int
    errors: int

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


@dataclass(frozen=True, slots=True)
class KindFigures:
    kind: str  # model or tool
    steps: int
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: float | None  # the steps' latencies added up


@dataclass(frozen=True, slots=True)
class StepSummary:
    results: int  # the run's results, with a trajectory or not
    with_steps: int  # results that have one
    steps: int
    tool_calls: int
    steps_per_result: dict[str, float | None] = field(default_factory=dict)
    tool_calls_per_result: dict[str, float | None] = field(default_factory=dict)
    tools: list[ToolFigures] = field(default_factory=list)  # most calls first
    kinds: list[KindFigures] = field(default_factory=list)


def histogram_percentiles(
    histogram: Counter[int], count: int
) -> dict[str, float | None]:
    """p50/p90 (numpy's linear definition) of ``count`` values given as
    value -> how many times it occurs."""
    if count <= 0:
        return dict.fromkeys(STEP_PERCENTILES)
    ordered = sorted(histogram.items())

    def value_at(position: int) -> int:
        seen = 0
        for value, times in ordered:
            seen += times
            if position < seen:
                return value
        return ordered[-1][0]

    figures: dict[str, float | None] = {}
    for name, fraction in STEP_PERCENTILES.items():
        lower, upper, weight = stats.percentile_positions(count, fraction)
        low, high = value_at(lower), value_at(upper)
        figures[name] = low + weight * (high - low)
    return figures


def _per_result_histogram(run: Run) -> Counter[tuple[int, int]]:
    """(steps, tool calls) of a result -> how many results have them."""
    step_table = Step._meta.db_table
    result_table = Result._meta.db_table
    sql = f"""
        SELECT per.steps, per.tools, COUNT(*)
        FROM (
            SELECT s.result_id, COUNT(*) AS steps,
                   SUM(CASE WHEN s.kind = %s THEN 1 ELSE 0 END) AS tools
            FROM {step_table} s
            JOIN {result_table} r ON r.id = s.result_id
            WHERE r.run_id = %s
            GROUP BY s.result_id
        ) per
        GROUP BY per.steps, per.tools
    """  # table names from the models, values as parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [Step.Kind.TOOL.value, run.pk])
        return Counter(
            {(int(steps), int(tools)): int(n) for steps, tools, n in cursor.fetchall()}
        )


def step_summary(run: Run, *, results: int) -> StepSummary | None:
    """The run's step figures; None when none of its results has steps
    (a run that never stored one is not read).

    ``results`` is how many results the run has (the summary counts them).
    """
    if not run.has_steps:
        return None
    per_result = _per_result_histogram(run)
    if not per_result:
        return None
    with_steps = sum(per_result.values())
    zeros = max(results - with_steps, 0)
    steps: Counter[int] = Counter({0: zeros}) if zeros else Counter()
    tools: Counter[int] = Counter({0: zeros}) if zeros else Counter()
    for (step_count, tool_count), n in per_result.items():
        steps[step_count] += n
        tools[tool_count] += n
    counted = with_steps + zeros
    rows = Step.objects.filter(result__run=run)
    per_tool = (
        rows.filter(kind=Step.Kind.TOOL)
        .values("name")
        .annotate(
            calls=Count("id"),
            errors=Count("id", filter=~Q(error="") | ~Q(error_type="")),
        )
        .order_by("-calls", "name")
    )
    per_kind = (
        rows.values("kind")
        .annotate(
            steps=Count("id"),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
            cost=Sum("cost"),
            latency_ms=Sum("latency_ms"),
        )
        .order_by("kind")
    )
    return StepSummary(
        results=counted,
        with_steps=with_steps,
        steps=sum(k * n for k, n in steps.items()),
        tool_calls=sum(k * n for k, n in tools.items()),
        steps_per_result=histogram_percentiles(steps, counted),
        tool_calls_per_result=histogram_percentiles(tools, counted),
        tools=[
            ToolFigures(row["name"], row["calls"], row["errors"]) for row in per_tool
        ],
        kinds=[KindFigures(**row) for row in per_kind],
    )

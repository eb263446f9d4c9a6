"""What the run page draws: score distributions, a latency histogram and the
completion timeline, each binned in the database so only a few rows come back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import (
    Case,
    Count,
    F,
    FloatField,
    Func,
    IntegerField,
    Max,
    Min,
    Q,
    Value,
    When,
)
from django.db.models.functions import Cast, Floor

from runs.analysis.summary import (
    RunSummary,
    cached_for_run,
)
from runs.analysis.timings import Timings
from runs.models import ATTEMPTS_MADE, Result, ResultStatus, Run, Score
from runs.records import cache_keys

# A bin of a scorer's scores: its index, how many, the lowest and highest value.
BinRow = tuple[int, int, float, float]

LATENCY_BINS = 20
SCORE_BINS = 10
TIMELINE_BUCKETS = 60
# Bucket widths of the timeline, in seconds: the smallest that gives at most
# TIMELINE_BUCKETS buckets.
NICE_SECONDS = (
    *(0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30),
    *(60, 120, 300, 600, 900, 1800),
    *(3600, 7200, 10800, 21600, 43200, 86400),
)


class EpochSeconds(Func):
    """Seconds since 1970 of a timestamp, as a float."""

    arity = 1
    output_field = FloatField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django stores UTC timestamps as text, which julianday reads.
        template = "((julianday(%(expressions)s) - 2440587.5) * 86400.0)"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS double precision)"
        return self.as_sql(compiler, connection, template=template, **extra)


def _bin(expression: Any, low: float, width: float) -> Cast:
    """The 0-based bin of ``expression`` in bins of ``width`` from ``low``."""
    return Cast(
        Floor((expression - Value(low)) / Value(width)), output_field=IntegerField()
    )


def _histogram(
    rows: Any, low: float, width: float, bins: int
) -> tuple[list[float], list[int]]:
    """Bin edges' left ends and counts; the maximum goes in the last bin."""
    counts = [0] * bins
    for index, count in rows:
        counts[min(max(int(index), 0), bins - 1)] += count
    return [low + i * width for i in range(bins)], counts


def pass_rate_chart(summary: RunSummary) -> list[dict[str, Any]]:
    """Each scorer's pass rate with its Wilson interval (from the summary)."""
    return [
        {
            "scorer": s.scorer,
            "rate": s.pass_rate,
            "low": s.pass_rate_ci[0] if s.pass_rate_ci else None,
            "high": s.pass_rate_ci[1] if s.pass_rate_ci else None,
            "passed": s.passed,
            "results": s.results,
        }
        for s in summary.scorers
    ]


def score_distributions(
    *,
    run: Run,
    summary: RunSummary,
    values: Mapping[str, np.ndarray] | None = None,
) -> list[dict[str, Any]]:
    """Per scorer, how many scores fall in each of SCORE_BINS equal bins from
    its lowest value to its highest, or have each value when there are so few
    distinct values that each bin holds only one.

    One query for every scorer: the bin of a score depends on its scorer.
    ``values``, each scorer's score values read already (a run's end reads
    them with its result table), are binned in memory instead when they hold
    every scorer with a value.
    """
    ranges = {
        s.scorer: (s.low, s.high)
        for s in summary.scorers
        if s.low is not None and s.high is not None  # both, or neither
    }
    if not ranges:
        return []
    widths = {name: (high - low) / SCORE_BINS for name, (low, high) in ranges.items()}
    if values is not None and _complete(values, ranges):
        bins = {
            name: _bins(values[name], low, widths[name] or 1.0)
            for name, (low, _high) in ranges.items()
        }
    else:
        bins = _bins_in_sql(run, ranges, widths)
    charts: list[dict[str, Any]] = []
    for name in ranges:
        mine = sorted(bins.get(name, []))
        if all(low == high for _index, _count, low, high in mine):
            charts.append(
                {
                    "scorer": name,
                    "values": [low for _index, _count, low, _high in mine],
                    "counts": [count for _index, count, _low, _high in mine],
                }
            )
            continue
        low, width = ranges[name][0], widths[name]
        starts, counts = _histogram(
            ((index, count) for index, count, _low, _high in mine),
            low,
            width,
            SCORE_BINS,
        )
        charts.append(
            {"scorer": name, "bins": starts, "width": width, "counts": counts}
        )
    return charts


def _complete(
    values: Mapping[str, np.ndarray], ranges: Mapping[str, tuple[float, float]]
) -> bool:
    """Whether ``values`` hold every scorer of ``ranges``, and only numbers
    the database bins alike (a NaN it cannot)."""
    return all(name in values and not np.isnan(values[name]).any() for name in ranges)


def _bins(values: np.ndarray, low: float, width: float) -> list[BinRow]:
    """``_bins_in_sql``'s rows of one scorer from its values: the same
    arithmetic (``_bin``) in the same double precision."""
    if not len(values):
        return []
    index = np.floor((values - low) / width).astype(np.int64)
    order = np.argsort(index, kind="stable")
    index, ordered = index[order], values[order]
    found, starts, counts = np.unique(index, return_index=True, return_counts=True)
    lows = np.minimum.reduceat(ordered, starts)
    highs = np.maximum.reduceat(ordered, starts)
    return list(
        zip(found.tolist(), counts.tolist(), lows.tolist(), highs.tolist(), strict=True)
    )


def _bins_in_sql(
    run: Run,
    ranges: Mapping[str, tuple[float, float]],
    widths: Mapping[str, float],
) -> dict[str, list[BinRow]]:
    """Each scorer's (bin, scores, lowest, highest value) rows, binned in the
    database."""
    bin_of = Case(
        *(
            When(scorer=name, then=_bin(F("value"), low, widths[name] or 1.0))
            for name, (low, _high) in ranges.items()
        ),
        default=Value(0),
        output_field=IntegerField(),
    )
    rows = (
        Score.objects.filter(result__run=run, value__isnull=False)
        .annotate(bin=bin_of)
        .values_list("scorer", "bin")
        .annotate(n=Count("id"), low=Min("value"), high=Max("value"))
        .order_by()
    )
    bins: dict[str, list[BinRow]] = {}
    for name, index, count, low, high in rows:
        bins.setdefault(name, []).append((index, count, low, high))
    return bins


def latency_histogram(
    *, run: Run, summary: RunSummary, timings: Timings | None = None
) -> dict[str, Any] | None:
    """Succeeded results' latency in LATENCY_BINS equal bins, min to max;
    binned in memory from ``timings`` when read already (a run's end)."""
    low, high = summary.latency_ms["min"], summary.latency_ms["max"]
    if low is None or high is None:
        return None
    bins = LATENCY_BINS if high > low else 1
    width = (high - low) / bins or 1.0
    rows: Iterable[tuple[int, int]]
    if timings is not None:
        found = _bins(timings.latencies, low, width)
        rows = [(index, count) for index, count, _low, _high in found]
    else:
        rows = (
            Result.objects.filter(
                run=run, status=ResultStatus.SUCCEEDED, latency_ms__isnull=False
            )
            .annotate(bin=_bin(F("latency_ms"), low, width))
            .values_list("bin")
            .annotate(n=Count("id"))
            .order_by()
        )
    starts, counts = _histogram(rows, low, width, bins)
    return {"bins": starts, "width": width, "counts": counts}


def completion_timeline(*, run: Run, summary: RunSummary) -> dict[str, Any] | None:
    """Results finished per time bucket since the run started: all of them,
    those that needed more than one attempt (retries and back-off), and those
    that ended in an error."""
    results = Result.objects.filter(run=run)
    last = summary.last_finished_at
    if last is None:
        return None
    start: datetime = (
        run.started_at or results.aggregate(Min("started_at"))["started_at__min"]
    )
    span = max((last - start).total_seconds(), 0.0)
    width = next(
        (w for w in NICE_SECONDS if span / w < TIMELINE_BUCKETS), NICE_SECONDS[-1]
    )
    buckets = max(math.floor(span / width) + 1, 1)
    rows = (
        results.annotate(
            bin=_bin(EpochSeconds("finished_at"), start.timestamp(), width),
            attempt_total=ATTEMPTS_MADE,
        )
        .values("bin")
        .annotate(
            finished=Count("id"),
            retried=Count("id", filter=Q(attempt_total__gt=1)),
            errored=Count("id", filter=~Q(status=ResultStatus.SUCCEEDED)),
        )
        .order_by()
    )
    series = {name: [0] * buckets for name in ("finished", "retried", "errored")}
    for row in rows:
        index = min(max(int(row["bin"]), 0), buckets - 1)
        series["finished"][index] += row["finished"]
        series["retried"][index] += row["retried"]
        series["errored"][index] += row["errored"]
    return {
        "start": start.isoformat(),
        "width_seconds": width,
        "offsets": [round(i * width, 3) for i in range(buckets)],
        **series,
    }


def run_charts(
    *,
    run: Run,
    summary: RunSummary,
    values: Mapping[str, np.ndarray] | None = None,
    timings: Timings | None = None,
) -> dict[str, Any]:
    """Everything the run page's charts draw, as plain JSON-ready data
    (``values``: see ``score_distributions``; ``timings``:
    ``latency_histogram``)."""
    return {
        "pass_rate": pass_rate_chart(summary),
        "scores": score_distributions(run=run, summary=summary, values=values),
        "latency": latency_histogram(run=run, summary=summary, timings=timings),
        "timeline": completion_timeline(run=run, summary=summary),
    }


def run_charts_cached(
    *,
    run: Run,
    summary: RunSummary,
    values: Mapping[str, np.ndarray] | None = None,
    timings: Timings | None = None,
) -> dict[str, Any]:
    """``run_charts``, kept under the run's ``results_version``."""
    return cached_for_run(
        run,
        cache_keys.run_charts(run),
        lambda: run_charts(run=run, summary=summary, values=values, timings=timings),
    )

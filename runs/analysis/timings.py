"""How long a run's succeeded results took: their latencies and times to
result, read once as arrays, and the figures made of them (percentiles,
lowest and highest; the charts bin the latencies, ``charts.latency_histogram``).

No index orders them: one on (run, status, latency_ms) cost every result
stored an update at a random place in it (bench/README, "The latency
index"). A run's end reads both columns in the scan that reads its results
anyway (``result_table.run_end_scan``); a going run's summary reads them on
its own, in one statement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import connection

from runs.models import Result, ResultStatus, Run

PERCENTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}

# Rows read from the database at a time.
CHUNK = 20_000


@dataclasses.dataclass(frozen=True, slots=True)
class Timings:
    """Succeeded results' latencies and times to result in milliseconds,
    each without the results that have none, in no order."""

    latencies: np.ndarray
    times: np.ndarray

    @classmethod
    def of_columns(cls, latencies: np.ndarray, times: np.ndarray) -> Timings:
        """Of succeeded results' two columns, row by row (NaN for NULL)."""
        return cls(
            latencies=latencies[~np.isnan(latencies)],
            times=times[~np.isnan(times)],
        )

    def latency_figures(self) -> dict[str, float | None]:
        """p50/p90/p99, lowest and highest latency."""
        return {**percentiles(self.latencies), **_extremes(self.latencies)}

    def time_figures(self) -> dict[str, float | None]:
        """p50/p90/p99 of the times to result."""
        return percentiles(self.times)


def percentiles(values: np.ndarray) -> dict[str, float | None]:
    """p50/p90/p99 of ``values``, numpy's linear definition; None without any."""
    if not len(values):
        return dict.fromkeys(PERCENTILES)
    found = np.percentile(values, [100 * f for f in PERCENTILES.values()])
    return dict(zip(PERCENTILES, map(float, found), strict=True))


def _extremes(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"min": None, "max": None}
    return {"min": float(values.min()), "max": float(values.max())}


def _floats(column: Sequence[Any]) -> np.ndarray:
    # NULL (None) becomes NaN.
    return np.array(column, dtype=np.float64)


def read_timings(run: Run) -> Timings:
    """The run's succeeded results' latencies and times to result, in one
    statement, a chunk of rows at a time."""
    # The ORM's statement, its rows fetched as they are: no Python call per row.
    sql, params = (
        Result.objects.filter(run=run, status=ResultStatus.SUCCEEDED)
        .values_list("latency_ms", "time_to_result_ms")
        .order_by()
        .query.sql_with_params()
    )
    latencies: list[np.ndarray] = [np.zeros(0)]
    times: list[np.ndarray] = [np.zeros(0)]
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(CHUNK):
            latency, time = zip(*rows, strict=True)
            latencies.append(_floats(latency))
            times.append(_floats(time))
    return Timings.of_columns(np.concatenate(latencies), np.concatenate(times))

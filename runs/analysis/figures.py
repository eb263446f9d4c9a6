"""A finished run's figures, stored with the run when it ends.

The summary and the chart data of a run of 100,000 items take several
aggregate passes over its results and scores (most of a second). A finished
run's results change only through what moves its ``results_version`` (a
retry, a re-score), so the executor computes its figures once, when the run
ends, and stores them (``RunFigures``); pages and the API read them back.
Stored figures are used only under the version they were computed for: stale
ones are computed again on the next read and stored in their place. A running
run's figures are always computed (and cached briefly, ``summary.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np

from runs.analysis.charts import run_charts_cached
from runs.analysis.result_table import run_end_scan, run_tables_store
from runs.analysis.summary import (
    FINAL_CACHE_SECONDS,
    RunSummary,
    ScorerSummary,
    run_summary_cached,
    store_for_run,
)
from runs.analysis.timings import Timings
from runs.models import Run, RunFigures
from runs.records import cache_keys, single_flight

logger = logging.getLogger(__name__)

# Raise when what is computed changes meaning without changing shape: stored
# figures of another format are computed again.
# 2: the summary names the models with no price; 3: time to result and
# failed attempts; 4: with several epochs, the pass rate's interval clustered
# by item, and its method; 5: results stopped in flight leave the pass rates.
FORMAT = 5


def _version(run: Run) -> str:
    return f"{FORMAT}:{run.results_version}"


def _encode(summary: RunSummary, charts: dict[str, Any]) -> dict[str, Any]:
    data = dataclasses.asdict(summary)
    if summary.last_finished_at is not None:
        data["last_finished_at"] = summary.last_finished_at.isoformat()
    return {"summary": data, "charts": charts}


def _scorer(data: dict[str, Any]) -> ScorerSummary:
    interval = data.pop("pass_rate_ci")
    return ScorerSummary(
        **data
        | {
            "pass_rate_ci": tuple(interval) if interval is not None else None,
            "pass_at_k": {int(k): v for k, v in data["pass_at_k"].items()},
            "pass_hat_k": {int(k): v for k, v in data["pass_hat_k"].items()},
        }
    )


def _decode(data: dict[str, Any]) -> tuple[RunSummary, dict[str, Any]] | None:
    """The stored figures, or None when they no longer fit the dataclasses."""
    try:
        summary = dict(data["summary"])
        finished = summary["last_finished_at"]
        summary.update(
            scorers=[_scorer(dict(s)) for s in summary["scorers"]],
            last_finished_at=datetime.fromisoformat(finished) if finished else None,
        )
        return RunSummary(**summary), data["charts"]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def run_figures(
    *,
    run: Run,
    values: Mapping[str, np.ndarray] | None = None,
    timings: Timings | None = None,
) -> tuple[RunSummary, dict[str, Any]]:
    """The run's summary and chart data: stored ones when current, else
    computed (and stored, once the run has ended); ``values``, each scorer's
    score values read already, spare the charts a read of the scores, and
    ``timings``, the succeeded results' latencies and times to result, the
    summary and the charts a read of those."""
    if not run.is_final:
        summary = run_summary_cached(run=run)
        return summary, run_charts_cached(run=run, summary=summary)
    # This process's cache first (no query), then the stored row; computed
    # once for concurrent misses.
    key = cache_keys.run_figures(run, FORMAT)
    return single_flight.cached(
        key, lambda: _stored_or_computed(run, values, timings), FINAL_CACHE_SECONDS
    )


def _stored_or_computed(
    run: Run, values: Mapping[str, np.ndarray] | None, timings: Timings | None
) -> tuple[RunSummary, dict[str, Any]]:
    stored = (
        RunFigures.objects.filter(run=run, version=_version(run))
        .values_list("data", flat=True)
        .first()
    )
    figures = _decode(stored) if stored is not None else None
    if figures is None:
        began = time.perf_counter()
        summary = run_summary_cached(run=run, timings=timings)
        figures = (
            summary,
            run_charts_cached(run=run, summary=summary, values=values, timings=timings),
        )
        store_for_run(
            RunFigures,
            run,
            version=_version(run),
            data=_encode(*figures),
            compute_seconds=time.perf_counter() - began,
        )
    return figures


def run_figures_store(run_id: int) -> None:
    """Compute and store an ended run's figures (the executor calls this when a
    run ends); a failure is logged, never the run's."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None or not run.is_final:
        return
    try:
        # One read of its results joined with their scores gives its result
        # table (for its results filters and clusters), its verdicts (for
        # comparisons, single-epoch runs), its score values (the charts) and
        # its latencies and times to result (the summary and the charts).
        scan = run_end_scan(run)
        if scan is None:
            run_figures(run=run)
        else:
            values = scan.score_values(run.scorer_names)
            run_figures(run=run, values=values, timings=scan.timings)
        run_tables_store(run=run, scan=scan)
    except Exception:  # the run has ended and is stored: its figures can wait
        logger.exception("could not store the figures of run %s", run_id)

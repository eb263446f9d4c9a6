"""How far a run has come: counts, throughput over a recent window, time left."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from runs.models import Result, Run

THROUGHPUT_WINDOW_SECONDS = 30


@dataclass(frozen=True, slots=True)
class RunProgress:
    run: Run
    processed: int
    total: int
    percent: float
    throughput: float | None  # items per second over the recent window
    eta_seconds: float | None
    alive: bool  # an executor has beaten recently


def run_progress(*, run: Run) -> RunProgress:
    """Progress figures from the stored counts; throughput over the last 30 s."""
    now = timezone.now()
    processed = run.processed
    total = run.total
    throughput = eta = None
    if run.started_at is not None:
        window_start = max(
            run.started_at, now - timedelta(seconds=THROUGHPUT_WINDOW_SECONDS)
        )
        end = run.finished_at or now
        seconds = (end - window_start).total_seconds()
        if run.is_final:
            elapsed = (end - run.started_at).total_seconds()
            throughput = processed / elapsed if elapsed > 0 else None
        elif seconds > 0.5:
            recent = Result.objects.filter(
                run=run, finished_at__gte=window_start
            ).count()
            throughput = recent / seconds
        if not run.is_final and throughput:
            eta = max(total - processed, 0) / throughput
    alive = run.alive
    return RunProgress(
        run=run,
        processed=processed,
        total=total,
        percent=round(100 * processed / total, 1) if total else 100.0,
        throughput=throughput,
        eta_seconds=eta,
        alive=alive,
    )

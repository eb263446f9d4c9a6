"""An ended run to review, named so that a page that leaks it can be caught."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from runs.models import Dataset, Result, Run, RunStatus
from tests.factories import echo_run, store_outcomes

RUN_NAME = "Zephyr-run-name"
TARGET_NAME = "Quokka-target-name"
MODEL_NAME = "narwhal-model-7b"
JUDGE_REASON = "Judge-verdict-reason"


def ended_run(
    dataset: Dataset, *, passed: list[bool] | None = None, name: str = RUN_NAME
) -> Run:
    """A completed run of ``dataset``: each item answered, exact_match passing
    as ``passed`` says (alternating by default), with a model and a run name
    that a blind page must not show."""
    count = dataset.items.count()
    verdicts = passed if passed is not None else [i % 2 == 0 for i in range(count)]
    run = echo_run(dataset)
    outcomes: list[dict[str, Any]] = [
        {"scores": [("exact_match", verdict, f"{JUDGE_REASON} {i}")]}
        for i, verdict in enumerate(verdicts)
    ]
    run = store_outcomes(run, outcomes)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED,
        finished_at=timezone.now(),
        name=name,
        target_name=TARGET_NAME,
    )
    Result.objects.filter(run=run).update(model=MODEL_NAME)
    run.refresh_from_db()
    return run

"""Runs with stored results of known figures, built straight through the ORM.

Each result's figures are kept beside the run, so a test can compute what a
summary must say with numpy and scipy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.utils import timezone

from runs.models import Dataset, Item, Result, Run, RunStatus, Score
from runs.results.services import run_create

SCORERS = ["exact_match", "includes"]
FAILURES = {
    Result.Status.FAILED: ["transient", "permanent", "quota"],
    Result.Status.TIMED_OUT: ["timeout"],
    Result.Status.CANCELLED: ["cancelled"],
}


@dataclass
class Stored:
    item_index: int
    epoch: int
    status: str
    error_kind: str = ""
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    attempts: int = 1
    finished_at: datetime | None = None
    # scorer -> (value, passed, error); a scorer absent here has no Score row
    scores: dict[str, tuple[float | None, bool | None, str]] = field(
        default_factory=dict
    )


def stored_run(
    dataset: Dataset,
    *,
    epochs: int = 1,
    seed: int = 0,
    missing: float = 0.0,
    costs: bool = True,
    status: str = RunStatus.COMPLETED,
) -> tuple[Run, list[Stored]]:
    """A run of ``dataset`` with random (seeded) results stored for it.

    ``missing`` is the share of (item, epoch) pairs left without a result.
    """
    rng = np.random.default_rng(seed)
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=SCORERS,
        options={"epochs": epochs},
        launch=False,
    )
    start = timezone.now() - timedelta(minutes=10)
    final = status not in (RunStatus.PENDING, RunStatus.RUNNING)
    Run.objects.filter(pk=run.pk).update(
        status=status,
        started_at=start,
        finished_at=start + timedelta(seconds=130) if final else None,
    )
    items = {item.index: item for item in Item.objects.filter(dataset=dataset)}
    stored: list[Stored] = []
    for index in sorted(items):
        for epoch in range(epochs):
            if rng.random() < missing:
                continue
            stored.append(_random_result(rng, index, epoch, start, costs=costs))
    _save(run, items, stored, start)
    run.refresh_from_db()
    return run, stored


def _random_result(
    rng: np.random.Generator, index: int, epoch: int, start: datetime, *, costs: bool
) -> Stored:
    status = rng.choice(
        [
            Result.Status.SUCCEEDED,
            Result.Status.FAILED,
            Result.Status.TIMED_OUT,
            Result.Status.CANCELLED,
        ],
        p=[0.7, 0.15, 0.1, 0.05],
    )
    result = Stored(
        item_index=index,
        epoch=epoch,
        status=str(status),
        attempts=int(rng.choice([1, 2, 3], p=[0.7, 0.2, 0.1])),
        finished_at=start + timedelta(seconds=float(rng.uniform(0, 120))),
    )
    if status != Result.Status.SUCCEEDED:
        result.error_kind = str(rng.choice(FAILURES[status]))
        return result
    result.latency_ms = round(float(rng.gamma(2.0, 50.0)), 3)
    result.prompt_tokens = int(rng.integers(10, 100))
    result.completion_tokens = int(rng.integers(1, 20))
    result.cost = round(float(rng.uniform(0, 0.01)), 6) if costs else None
    # exact_match: 0 or 1, sometimes errored; includes: a value in [0, 1].
    if rng.random() < 0.1:
        result.scores["exact_match"] = (None, None, "TimeoutError: judge")
    else:
        hit = bool(rng.random() < 0.6)
        result.scores["exact_match"] = (float(hit), hit, "")
    value = round(float(rng.random()), 4)
    result.scores["includes"] = (value, value >= 0.5, "")
    return result


def _save(
    run: Run, items: dict[int, Item], stored: list[Stored], start: datetime
) -> None:
    rows = Result.objects.bulk_create(
        Result(
            run=run,
            item=items[s.item_index],
            item_index=s.item_index,
            epoch=s.epoch,
            status=s.status,
            output=None if s.status != Result.Status.SUCCEEDED else "out",
            error_kind=s.error_kind,
            error_type="Boom" if s.error_kind else "",
            error_message="boom" if s.error_kind else "",
            attempts=[{"number": n + 1} for n in range(s.attempts)],
            latency_ms=s.latency_ms,
            prompt_tokens=s.prompt_tokens,
            completion_tokens=s.completion_tokens,
            cost=s.cost,
            started_at=start,
            finished_at=s.finished_at,
        )
        for s in stored
    )
    Score.objects.bulk_create(
        Score(result=row, scorer=name, value=value, passed=passed, error=error)
        for row, s in zip(rows, stored, strict=True)
        for name, (value, passed, error) in s.scores.items()
    )
    counts = {status: 0 for status in Result.Status.values}
    for s in stored:
        counts[s.status] += 1
    Run.objects.filter(pk=run.pk).update(**counts)

"""Runs with stored results and scores, built through the ORM, for comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.utils import timezone

from runs.models import Dataset, Item, Result, Run, RunStatus, Score

# An outcome of one result: a score value (passed when >= 0.5), "error" (the
# scorer raised), "skipped" (the scorer's condition did not hold) or "failed"
# (the target call failed: no score at all).
Outcome = float | str


def make_run(
    dataset: Dataset,
    *,
    scorers: Sequence[str] = ("exact_match",),
    name: str = "",
    epochs: int = 1,
) -> Run:
    return Run.objects.create(
        project=dataset.project,
        dataset=dataset,
        dataset_hash=dataset.content_hash,
        name=name,
        target_name="model",
        target_kind="demo",
        scorers=[{"kind": scorer, "name": scorer} for scorer in scorers],
        options={"epochs": epochs},
        total=dataset.item_count * epochs,
        status=RunStatus.PENDING,
    )


def add_result(
    run: Run,
    item: Item,
    outcomes: dict[str, Outcome],
    *,
    epoch: int = 0,
    output: Any = None,
) -> Result:
    now = timezone.now()
    failed = "failed" in outcomes.values()
    result = Result.objects.create(
        run=run,
        item=item,
        item_index=item.index,
        epoch=epoch,
        status=Result.Status.FAILED if failed else Result.Status.SUCCEEDED,
        output=None if failed else (output if output is not None else "answer"),
        error_kind="permanent" if failed else "",
        error_message="HTTP 400" if failed else "",
        started_at=now - timedelta(seconds=1),
        finished_at=now,
    )
    if not failed:
        Score.objects.bulk_create(
            Score(result=result, scorer=scorer, error="boom")
            if outcome == "error"
            else Score(
                result=result,
                scorer=scorer,
                skipped=True,
                reason="skipped: exact_match passed",
            )
            if outcome == "skipped"
            else Score(
                result=result,
                scorer=scorer,
                value=float(outcome),
                passed=float(outcome) >= 0.5,
            )
            for scorer, outcome in outcomes.items()
        )
    return result


def finish(run: Run) -> Run:
    """Counts from the stored rows, as the executor keeps them."""
    results = Result.objects.filter(run=run)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED,
        succeeded=results.filter(status=Result.Status.SUCCEEDED).count(),
        failed=results.filter(status=Result.Status.FAILED).count(),
        started_at=timezone.now() - timedelta(seconds=5),
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    return run


def paired_runs(
    dataset: Dataset,
    *,
    both_passed: int,
    regressions: int,
    improvements: int,
    both_failed: int,
    scorer: str = "exact_match",
) -> tuple[Run, Run]:
    """A baseline and a candidate whose paired table is the one given.

    Items are taken in dataset order: first both passed, then regressions,
    improvements and both failed; the dataset needs that many items.
    """
    cells = (
        [(1.0, 1.0)] * both_passed
        + [(1.0, 0.0)] * regressions
        + [(0.0, 1.0)] * improvements
        + [(0.0, 0.0)] * both_failed
    )
    items = list(dataset.items.order_by("index")[: len(cells)])
    assert len(items) == len(cells), "the dataset has too few items"
    baseline = make_run(dataset, scorers=[scorer], name="baseline")
    candidate = make_run(dataset, scorers=[scorer], name="candidate")
    for item, (base, cand) in zip(items, cells, strict=True):
        add_result(baseline, item, {scorer: base}, output=f"b{base}")
        add_result(candidate, item, {scorer: cand}, output=f"c{cand}")
    return finish(baseline), finish(candidate)

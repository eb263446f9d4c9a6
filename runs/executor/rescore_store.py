"""What a scoring pass reads from and writes to the database.

Plain sync functions, each its own transaction, called from the pass's
execution (``rescore.py``) through ``database_sync_to_async``, as
``store.py`` is for runs. A pass writes only scores: results, their outputs
and the run's counts stay as they are.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from runs.calls.pricing import price_table
from runs.executor.items import total_cost
from runs.executor.store import (
    EXECUTOR_ID,
    UNPRICED,
    ItemData,
    ScoreRecord,
    ScoringSpec,
)
from runs.models import HEARTBEAT_STALE_SECONDS, Item, Result, Run, Score, ScoringPass
from runs.plugins.steps import Step
from runs.records import rows as records_rows
from runs.records.trajectories import stored_steps
from runs.records.versions import results_changed

RESULT_PAGE_SIZE = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class PassSpec(ScoringSpec):
    id: int
    run_id: int


@dataclass(frozen=True, slots=True)
class ToScore:
    """A stored result with an output, and what its scorers see of its item."""

    result_id: int
    output: Any
    item: ItemData
    # Stored scores of scorers outside the pass that its conditions name.
    stored: dict[str, ScoreRecord] = field(default_factory=dict)
    # Its stored trajectory, read when a scorer of the pass reads steps.
    steps: list[Step] = field(default_factory=list)


def results_to_score(run_id: int) -> Any:
    """The results a pass scores: those that succeeded, so have an output."""
    return Result.objects.filter(
        run_id=run_id, status=Result.Status.SUCCEEDED, retry_pending=False
    )


def pass_claim(pass_id: int, *, executor_id: str = EXECUTOR_ID) -> PassSpec | None:
    """Mark the pass running for this executor, unless it is not waiting for one.

    A pass already running is taken over only from an executor that stopped
    reporting (its writes are idempotent, so it simply starts over).
    """
    now = timezone.now()
    stale = now - timedelta(seconds=HEARTBEAT_STALE_SECONDS)
    waiting = Q(status=ScoringPass.Status.PENDING) | Q(
        Q(heartbeat_at__lt=stale) | Q(executor_id=executor_id),
        status=ScoringPass.Status.RUNNING,
    )
    with transaction.atomic():
        claimed = (
            ScoringPass.objects.filter(pk=pass_id)
            .filter(waiting)
            .update(
                status=ScoringPass.Status.RUNNING,
                executor_id=executor_id,
                heartbeat_at=now,
                started_at=now,
                scored=0,
                errored=0,
            )
        )
        if not claimed:
            return None
        scoring = ScoringPass.objects.select_related("run").get(pk=pass_id)
        total = results_to_score(scoring.run_id).count()
        ScoringPass.objects.filter(pk=pass_id).update(total=total)
    return PassSpec(
        id=scoring.pk,
        run_id=scoring.run_id,
        scorers=scoring.scorers,
        options=scoring.run.options,
        # A judge's tokens are priced as the run's were (its first start's
        # table), or by today's table for a run that never started.
        prices=scoring.run.prices or price_table().to_json(),
        project_id=scoring.run.project_id,
    )


def pass_heartbeat(pass_id: int, *, executor_id: str = EXECUTOR_ID) -> None:
    ScoringPass.objects.filter(pk=pass_id, executor_id=executor_id).update(
        heartbeat_at=timezone.now()
    )


def pass_results_page(
    run_id: int,
    *,
    after_id: int,
    conditions_on: Collection[str] = (),
    with_steps: bool = False,
) -> list[ToScore]:
    """The next page of results to score, by id, with their items, their
    stored scores of the scorers ``conditions_on`` and, ``with_steps``,
    their trajectories."""
    rows = list(
        results_to_score(run_id)
        .filter(pk__gt=after_id)
        .order_by("pk")
        .values_list("pk", "output", "item_id")[:RESULT_PAGE_SIZE]
    )
    fields = ("pk", "index", "external_id", "input", "expected", "metadata")
    items = {
        row[0]: ItemData(*row)
        for row in Item.objects.filter(pk__in={r[2] for r in rows}).values_list(*fields)
    }
    stored: dict[int, dict[str, ScoreRecord]] = {}
    if conditions_on and rows:
        scores = Score.objects.filter(
            result_id__in=[row[0] for row in rows], scorer__in=list(conditions_on)
        ).values_list("result_id", "scorer", "value", "passed", "error", "skipped")
        for result_id, scorer, value, passed, error, skipped in scores:
            stored.setdefault(result_id, {})[scorer] = ScoreRecord(
                scorer, value, passed, error=error, skipped=skipped
            )
    steps = stored_steps([row[0] for row in rows]) if with_steps and rows else {}
    return [
        ToScore(pk, output, items[item_id], stored.get(pk, {}), steps.get(pk, []))
        for pk, output, item_id in rows
    ]


def pass_scores_write(
    pass_id: int, run_id: int, scored: list[tuple[int, list[ScoreRecord]]]
) -> int:
    """Add or replace, by scorer name, the scores of a batch of results.

    An upsert on the (result, scorer) constraint: writing a batch twice (a
    pass run again after a crash) leaves the same rows. The run's revision
    moves in the same transaction, so nothing cached from its scores is kept.
    Returns how many results were written.
    """
    pairs = [(pk, record) for pk, records in scored for record in records]
    errors = sum(bool(record.error) for _, record in pairs)
    now = timezone.now()
    with transaction.atomic():
        records_rows.scores_replace(pairs)
        _results_cost([pk for pk, _records in scored])
        ScoringPass.objects.filter(pk=pass_id).update(
            scored=F("scored") + len(scored),
            errored=F("errored") + errors,
            heartbeat_at=now,
        )
        results_changed(run_id)
    return len(scored)


def _used(prompt: Any, completion: Any) -> bool:
    return prompt is not None or completion is not None


def _results_cost(result_ids: list[int]) -> None:
    """Each result's cost again: its attempts' and its scores' (a judge's).

    From what is stored, so a pass run twice gives the same figures; None
    when a call that used tokens has no price, as the executor counts it.
    """
    costs: dict[int, list[tuple[bool, float | None]]] = {}
    attempts = Result.objects.filter(pk__in=result_ids).values_list("pk", "attempts")
    for pk, log in attempts:
        costs[pk] = [
            (_used(a.get("prompt_tokens"), a.get("completion_tokens")), a.get("cost"))
            for a in log or []
            if isinstance(a, dict)
        ]
    scores = Score.objects.filter(result_id__in=result_ids).values_list(
        "result_id", "prompt_tokens", "completion_tokens", "cost"
    )
    for pk, prompt, completion, cost in scores:
        costs[pk].append((_used(prompt, completion), cost))
    records_rows.result_costs_set(
        {pk: total_cost(calls) for pk, calls in costs.items()}
    )


def run_cost_recount(run_id: int) -> None:
    """The run's cost and unpriced count from its results (after a pass)."""
    totals = Result.objects.filter(run_id=run_id, retry_pending=False).aggregate(
        spent=Sum("cost"), unpriced=Count("id", filter=UNPRICED)
    )
    Run.objects.filter(pk=run_id).update(
        cost=totals["spent"] or 0.0, unpriced=totals["unpriced"]
    )


def pass_finish(pass_id: int, *, error: str = "") -> str:
    """Record the pass's end; returns its status."""
    status = ScoringPass.Status.FAILED if error else ScoringPass.Status.COMPLETED
    with transaction.atomic():
        scoring = ScoringPass.objects.select_for_update().get(pk=pass_id)
        scoring.status = status
        scoring.error = error
        scoring.finished_at = scoring.heartbeat_at = timezone.now()
        scoring.save(update_fields=["status", "error", "finished_at", "heartbeat_at"])
        run_cost_recount(scoring.run_id)
        results_changed(scoring.run_id)
    return status


def pass_running(pass_id: int) -> bool:
    """The pass is held by an executor (live or not yet seen as dead)."""
    return ScoringPass.objects.filter(
        pk=pass_id, status=ScoringPass.Status.RUNNING
    ).exists()

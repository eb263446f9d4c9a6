"""Everything the executor reads from and writes to the database.

Plain sync functions, each its own transaction, called from the executor
through ``database_sync_to_async``.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Case, Count, Exists, F, OuterRef, Q, Sum, Value, When
from django.utils import timezone

from runs.calls.pricing import price_table
from runs.models import (
    HEARTBEAT_STALE_SECONDS,
    RUN_COUNTS,
    Item,
    Result,
    Run,
    RunStatus,
    Score,
)
from runs.plugins.steps import Step
from runs.records import compiled, retries, rows, tallies
from runs.records.plain_rows import json_value

ITEM_PAGE_SIZE = 500
# Past any item's index: PostgreSQL's integer, an item index's column there.
INDEX_CEILING = 2**31 - 1
HOSTNAME = socket.gethostname()
EXECUTOR_ID = f"{HOSTNAME}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def executor_is_dead(executor_id: str) -> bool:
    """True only when ``executor_id`` names a process of this host that has exited."""
    host, _, rest = executor_id.partition(":")
    pid_text = rest.partition(":")[0]
    if host != HOSTNAME or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return executor_id != EXECUTOR_ID
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoringSpec:
    """What scoring needs of a run or of a scoring pass over one."""

    scorers: list[dict[str, Any]]
    options: dict[str, Any]
    # The run's frozen price table (pricing.py).
    prices: dict[str, Any] = field(default_factory=dict)
    # Whose share of the scorer workers its scoring uses (runs/pools/shares.py).
    project_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec(ScoringSpec):
    id: int
    dataset_id: int
    target_kind: str
    target_config: dict[str, Any]
    total: int
    started_at: datetime
    processed: int
    errored: int
    # What the run has cost so far.
    cost: float = 0.0
    # The saved target the run was made from, if any: what its rate limit is
    # shared by (shared_limits.py).
    target_id: int | None = None
    # The index after the run's last item, when it runs only the dataset's
    # first ``Run.item_limit`` items; None: it runs them all.
    index_stop: int | None = None


# A run spec's fields read from the run itself (``index_stop`` is derived).
RUN_SPEC_FIELDS = tuple(
    f.name for f in dataclasses.fields(RunSpec) if f.name != "index_stop"
)


@dataclass(frozen=True, slots=True)
class ItemData:
    """What the executor needs of an item (no model instance: they are costly)."""

    pk: int
    index: int
    external_id: str
    input: Any
    expected: Any
    metadata: dict[str, Any]


@dataclass(slots=True, kw_only=True)
class Usage:
    """What a call used (a target's, or a judge's for a score)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    model: str = ""


@dataclass(slots=True)
class ScoreRecord(Usage):
    scorer: str
    value: float | None
    passed: bool | None
    reason: str = ""
    error: str = ""
    skipped: bool = False


@dataclass(slots=True)
class ResultRecord(Usage):
    item_id: int
    item_index: int
    epoch: int
    status: str
    output: Any
    attempts: list[dict[str, Any]]
    started_at: datetime
    finished_at: datetime
    error_kind: str = ""
    error_type: str = ""
    error_message: str = ""
    latency_ms: float | None = None
    scores: list[ScoreRecord] = field(default_factory=list)
    # The trajectory of the attempt that gave the outcome (stored with it).
    steps: list[Step] | None = None

    @property
    def unpriced(self) -> bool:
        """Tokens were used and have no price (``UNPRICED`` for stored rows),
        by the target or by a judge among its scorers."""
        used = self.prompt_tokens is not None or self.completion_tokens is not None
        return (used or self.unpriced_model is not None) and self.cost is None

    @property
    def unpriced_model(self) -> str | None:
        """The model whose tokens have no price: the target's, else a judge's."""
        used = self.prompt_tokens is not None or self.completion_tokens is not None
        if used and self.cost is None:
            return self.model
        for score in self.scores:
            tokens = (score.prompt_tokens, score.completion_tokens)
            if tokens != (None, None) and score.cost is None:
                return score.model
        return None


# Stored results whose tokens, or a judge's among their scores, have no
# price: their cost is unknown.
_USED_TOKENS = Q(prompt_tokens__isnull=False) | Q(completion_tokens__isnull=False)
UNPRICED = Q(cost__isnull=True) & (
    _USED_TOKENS
    | Q(
        Exists(
            Score.objects.filter(_USED_TOKENS, result=OuterRef("pk"), cost__isnull=True)
        )
    )
)


def run_claim(run_id: int, *, executor_id: str = EXECUTOR_ID) -> RunSpec | None:
    """Mark the run running for this executor, unless another live one holds it."""
    now = timezone.now()
    stale = now - timedelta(seconds=HEARTBEAT_STALE_SECONDS)
    free = (
        Q(heartbeat_at__isnull=True)
        | Q(heartbeat_at__lt=stale)
        | Q(executor_id=executor_id)
    )
    holder = Run.objects.filter(pk=run_id).values_list("executor_id", flat=True).first()
    if holder and executor_is_dead(holder):
        # Its process has exited: no need to wait for the heartbeat to go stale.
        free |= Q(executor_id=holder)
    with transaction.atomic():
        claimed = (
            Run.objects.filter(
                pk=run_id, status__in=[RunStatus.PENDING, RunStatus.RUNNING]
            )
            .filter(free)
            .update(
                status=RunStatus.RUNNING,
                executor_id=executor_id,
                heartbeat_at=now,
                in_flight=0,
            )
        )
        if not claimed:
            return None
        # The run keeps the start of its first execution; a retry pass has its own.
        Run.objects.filter(pk=run_id, started_at__isnull=True).update(started_at=now)
        pass_started = retries.retry_pass_start(run_id, now)
        # The prices of its first start stay the run's, through resumes and
        # retries: one run, one price per model.
        Run.objects.filter(pk=run_id, prices__isnull=True).update(
            prices=price_table().to_json()
        )
        run = Run.objects.get(pk=run_id)
    return run_spec(run, started_at=pass_started)


def run_spec(run: Run, *, started_at: datetime | None = None) -> RunSpec:
    """What an executor needs of a run it has claimed (whole or a shard);
    ``started_at`` that of its retry pass under way, if any."""
    assert run.started_at is not None  # a claim sets it first
    # A run spec's fields are the run's own, but for the start of a retry
    # pass under way.
    values = {name: getattr(run, name) for name in RUN_SPEC_FIELDS}
    return RunSpec(
        **values
        | {
            "prices": run.prices or {},
            "started_at": started_at or run.started_at,
            "index_stop": run_index_stop(run),
        }
    )


def run_index_stop(run: Run) -> int | None:
    """The index after the last of the run's items when it has an item limit
    (items are its dataset's first ``item_limit`` by index); None without."""
    if run.item_limit is None:
        return None
    last = (
        Item.objects.filter(dataset_id=run.dataset_id)
        .order_by("index")
        .values_list("index", flat=True)[run.item_limit - 1 : run.item_limit]
        .first()
    )
    return None if last is None else last + 1


def index_bounds(
    index_range: tuple[int, int] | None, index_stop: int | None
) -> tuple[int, int | None]:
    """The indexes an execution runs: its range (a shard's), else all, and
    never past the run's last item (``index_stop``)."""
    start, stop = index_range or (0, None)
    if index_stop is not None:
        stop = index_stop if stop is None else min(stop, index_stop)
    return start, stop


@dataclass(frozen=True, slots=True)
class Pulse:
    """What an executor reports with each heartbeat, of a run or a shard: how
    far it backs off (None: not at all), how many items it holds, how long
    its calls take."""

    throttle_limit: int | None = None
    in_flight: int = 0
    call_latency: float | None = None

    def columns(self) -> dict[str, Any]:
        """The run's (or shard's) columns it sets: named as its fields."""
        return dataclasses.asdict(self)


# The pulse of an executor that holds nothing and does not back off.
IDLE = Pulse()


def run_heartbeat(
    run_id: int, *, pulse: Pulse = IDLE, executor_id: str = EXECUTOR_ID
) -> bool:
    """Record that the run is alive, with its ``pulse``; returns whether a
    cancel was requested."""
    Run.objects.filter(pk=run_id, executor_id=executor_id).update(
        heartbeat_at=timezone.now(), **pulse.columns()
    )
    return Run.objects.filter(pk=run_id, cancel_requested=True).exists()


def run_spent(run_id: int) -> float:
    """What the run's stored results have cost (every executor's)."""
    return Run.objects.filter(pk=run_id).values_list("cost", flat=True).first() or 0.0


def cancel_requested(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, cancel_requested=True).exists()


def item_page(
    dataset_id: int,
    *,
    after_index: int,
    stop_index: int | None,
    epochs: int,
    run_id: int,
) -> list[tuple[ItemData, list[int]]]:
    """The next page of items, each with the epochs that still lack a result.

    A result chosen for a retry (``retry_pending``) counts as lacking: its
    item runs again and ``results_write`` rewrites the row.
    """
    # Always a range of both ends (on PostgreSQL, without statistics, an open
    # range is taken for a third of the dataset's items, more than a page:
    # they were all read and sorted for each page, 1 s at a million items).
    stop = INDEX_CEILING if stop_index is None else stop_index
    names, found = compiled.fetch(
        _item_page_read(),
        {"dataset": dataset_id, "after": after_index, "stop": stop},
        limit=ITEM_PAGE_SIZE,
        convert=False,
    )
    columns = [names.index(name) for name in ITEM_COLUMNS]
    page = [ItemData(*item_values(row, columns)) for row in found]
    if not page:
        return []
    done: dict[int, set[int]] = {}
    # By the page's range of indexes (the run's results carry their item's
    # index), not a list of its 500 ids: two parameters instead of 500, which
    # PostgreSQL's driver would otherwise merge into the query text each page.
    _, stored = compiled.fetch(
        _stored_in_range(),
        {"run": run_id, "low": page[0].index, "high": page[-1].index},
        convert=False,
    )
    for index, epoch in stored:
        done.setdefault(index, set()).add(epoch)
    every = list(range(epochs))
    return [
        (item, [e for e in every if e not in done[item.index]])
        if item.index in done
        else (item, every.copy())
        for item in page
    ]


# An item page's columns, in ItemData's order; the last three are JSON.
ITEM_COLUMNS = ("id", "index", "external_id", "input", "expected", "metadata")


def item_values(row: tuple[Any, ...], columns: list[int]) -> tuple[Any, ...]:
    pk, index, external_id, value, expected, metadata = (row[c] for c in columns)
    return (
        pk,
        index,
        external_id,
        json_value(value),
        json_value(expected),
        json_value(metadata),
    )


def _item_page_read() -> compiled.Statement:
    """A page of a dataset's items between two indexes: compiled once, as the
    executor reads a page for every 500 items it runs."""
    return compiled.statement(
        "executor-item-page",
        lambda args: (
            Item.objects.filter(
                dataset_id=args.integer("dataset"),
                index__gt=args.positive("after"),
                index__lt=args.positive("stop"),
            )
            .order_by("index")
            .values(*ITEM_COLUMNS)
        ),
        sliced=True,
    )


def _stored_in_range() -> compiled.Statement:
    """The run's results in a range of item indexes, in the order of the
    index (run, item index, epoch). The order is what makes the planner take
    that index whatever its statistics: when they predate the run, every
    index that starts with the run looks as cheap (the run taken for a row
    or two), and without the order it took another one, reading every
    result of the run for each page (0.3 s at 200,000 results); any other
    index now needs a sort besides."""
    return compiled.statement(
        "executor-stored-in-range",
        lambda args: (
            Result.objects.filter(
                run_id=args.integer("run"),
                item_index__gte=args.positive("low"),
                item_index__lte=args.positive("high"),
                retry_pending=False,
            )
            .order_by("item_index", "epoch")
            .values("item_index", "epoch")
        ),
    )


# A run's score tallies (runs/records/tallies.py) begin with the first batch
# stored of a going run that has none: nothing counted and nothing ever taken
# back (revision 0; results waiting for a retry are out of the counts). Every
# later batch goes through here and adds its tallies. Results written
# otherwise (a fixture, an import of rows) never begin them: their run's
# figures come from its rows. The values are the row's before the update.
TALLY_BEGINS = Case(
    When(
        Q(tally_revision__isnull=True, revision=0)
        & Q(status__in=[RunStatus.PENDING, RunStatus.RUNNING])
        & Q(**{count: 0 for count in RUN_COUNTS[1:]}),
        then=Value(0),
    ),
    default=F("tally_revision"),
)


def results_write(run_id: int, records: list[ResultRecord]) -> int:
    """Store a batch of results with their scores and counts in one transaction.

    A result that already exists (written by another executor of the same run)
    is left as it is; the unique constraint makes a duplicate impossible. A
    result waiting for a retry is rewritten in place (same row, the attempt
    log extended) and counted again. The rows are written by ``rows``; what
    it reports written is what is counted. Returns how many results were
    stored.
    """
    with transaction.atomic():
        stored = rows.results_store(run_id, records)
        counted = [record for _, record in stored]
        by_status: dict[str, int] = {}
        for r in counted:
            by_status[r.status] = by_status.get(r.status, 0) + 1
        # Its first steps mark the run as having some, with the counts.
        marks = {"has_steps": True} if any(r.steps for r in counted) else {}
        Run.objects.filter(pk=run_id).update(
            **marks,
            succeeded=F("succeeded") + by_status.get(Result.Status.SUCCEEDED, 0),
            failed=F("failed") + by_status.get(Result.Status.FAILED, 0),
            timed_out=F("timed_out") + by_status.get(Result.Status.TIMED_OUT, 0),
            cancelled=F("cancelled") + by_status.get(Result.Status.CANCELLED, 0),
            prompt_tokens=F("prompt_tokens")
            + sum(r.prompt_tokens or 0 for r in counted),
            completion_tokens=F("completion_tokens")
            + sum(r.completion_tokens or 0 for r in counted),
            cost=F("cost") + sum(r.cost or 0.0 for r in counted),
            unpriced=F("unpriced") + sum(r.unpriced for r in counted),
            heartbeat_at=timezone.now(),
            tally_revision=TALLY_BEGINS,
        )
        # After the run's row, under its lock (tallies.py says why).
        tallies.batch_stored(run_id, counted)
    return len(counted)


def run_counts(run_id: int) -> dict[str, int]:
    """Counts recomputed from the stored results: the truth.

    Results waiting for a retry are not counted: they are pending again.
    """
    counts = {status: 0 for status in Result.Status.values}
    for row in (
        Result.objects.filter(run_id=run_id, retry_pending=False)
        .values("status")
        .annotate(n=Count("id"))
    ):
        counts[row["status"]] = row["n"]
    return counts


def run_recount(run: Run) -> None:
    """Set ``run``'s counts and totals from its counted rows (not saved)."""
    counts = run_counts(run.pk)
    totals = Result.objects.filter(run_id=run.pk, retry_pending=False).aggregate(
        prompt=Sum("prompt_tokens"),
        completion=Sum("completion_tokens"),
        spent=Sum("cost"),
        unpriced=Count("id", filter=UNPRICED),
    )
    run.succeeded = counts[Result.Status.SUCCEEDED]
    run.failed = counts[Result.Status.FAILED]
    run.timed_out = counts[Result.Status.TIMED_OUT]
    run.cancelled = counts[Result.Status.CANCELLED]
    run.prompt_tokens = totals["prompt"] or 0
    run.completion_tokens = totals["completion"] or 0
    run.cost = totals["spent"] or 0.0
    run.unpriced = totals["unpriced"]


def retries_release(run_id: int) -> int:
    """Results still waiting for a retry keep their previous outcome.

    Called when a run ends, in the transaction that recounts it.
    """
    return rows.retry_release(run_id)


def run_finish(
    run_id: int,
    *,
    cancelled: bool,
    error: str = "",
    shard: bool = False,
    drained: bool = False,
) -> str:
    """Recount from stored rows and set the final status; returns it.

    A shard that finished its own items leaves the run running (and free to
    claim) while other items still lack a result. A run drained by its cost
    budget (``drained``, with ``error`` its reason) that skipped nothing ends
    as if it had not been.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).get(pk=run_id)
        counts = run_counts(run_id)
        unfinished = sum(counts.values()) < run.total
        if shard and unfinished and not (cancelled or run.cancel_requested or error):
            Run.objects.filter(pk=run_id).update(heartbeat_at=None, executor_id="")
            return RunStatus.RUNNING
        retries_release(run_id)
        run_recount(run)
        processed = run.processed
        if drained and processed >= run.total:
            error = ""
        if cancelled or run.cancel_requested:
            run.status = RunStatus.CANCELLED
        elif error:
            run.status = RunStatus.FAILED
        elif processed < run.total:
            run.status = RunStatus.FAILED
            error = f"{run.total - processed} of {run.total} items have no result"
        elif run.succeeded == run.total:
            run.status = RunStatus.COMPLETED
        elif run.succeeded == 0:
            run.status = RunStatus.FAILED
            error = f"all {run.total} items failed"
        else:
            run.status = RunStatus.COMPLETED_WITH_ERRORS
        run.error = error or run.error
        now = timezone.now()
        # A retry pass ends with its own time; the run keeps its first end.
        run.finished_at = retries.retry_pass_end(run_id, run.status, now) or now
        run.heartbeat_at = now
        run.throttle_limit = None
        run.in_flight = 0
        tallies.tallies_end(run)
        run.save()
    return run.status


def orphaned_runs() -> list[int]:
    """Runs that should be executing but whose executor stopped beating or exited."""
    stale = timezone.now() - timedelta(seconds=HEARTBEAT_STALE_SECONDS)
    candidates = Run.objects.filter(status__in=[RunStatus.PENDING, RunStatus.RUNNING])
    orphans = []
    for run_id, holder, beat, created in candidates.values_list(
        "pk", "executor_id", "heartbeat_at", "created_at"
    ):
        last_sign_of_life = beat or created
        if last_sign_of_life < stale or (holder and executor_is_dead(holder)):
            orphans.append(run_id)
    return orphans

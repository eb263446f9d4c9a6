"""What the distributed executor reads and writes about shards of a run.

The companion of ``store.py`` for runs split into shards (``RunShard``), each
executed by whichever worker holds its procrastinate job. Each function is
one transaction. Four rules make many workers on one run safe:

- the claim, the heartbeat and the end are per shard: workers never fight
  over ``Run.executor_id``, and their heartbeats never clobber each other;
- results are stored by ``store.results_write`` (unique per item and epoch,
  counts through ``F()``), so ``processed + skipped == total`` holds at every
  moment, and an item executed twice (after a crash) is stored once;
- a shard ends under the run's row lock: the run ends exactly once, with the
  shard that leaves no other pending or running;
- a shard that stops the run with an error (``STOPPED``) stops them all: the
  running ones hear it with their heartbeat, the pending ones are refused
  their claim, and the first stop's error is the run's. Shards are replaced
  when the run is executed again (a retry, a resume), so an old stop never
  stops a new execution.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, F, Max, Min, OuterRef, Q, Sum
from django.utils import timezone

from runs.calls.pricing import price_table
from runs.executor import store
from runs.executor.store import EXECUTOR_ID, IDLE, Pulse, RunSpec, run_spec
from runs.models import Item, Result, Run, RunShard, RunStatus
from runs.records import retries

ACTIVE = (RunShard.Status.PENDING, RunShard.Status.RUNNING)


@dataclass(frozen=True, slots=True)
class RunSignal:
    """What an executor of a shard hears of its run: go on, or stop and why."""

    cancelled: bool = False
    # The error another shard stopped the run with; it stays the run's.
    stopped: str = ""


def _stopped(run_id: int) -> bool:
    return RunShard.objects.filter(
        run_id=run_id, status=RunShard.Status.STOPPED
    ).exists()


def run_signal(run_id: int) -> RunSignal:
    """Whether the shards of the run must stop: a cancel, or another shard's
    stop (fail fast, its deadline, storage, an executor error)."""
    row = (
        Run.objects.filter(pk=run_id)
        .annotate(
            stopped=Exists(
                RunShard.objects.filter(
                    run_id=OuterRef("pk"), status=RunShard.Status.STOPPED
                )
            )
        )
        .values_list("cancel_requested", "stopped", "error")
        .first()
    )
    if row is None:
        return RunSignal()
    cancelled, stopped, error = row
    return RunSignal(cancelled=cancelled, stopped=error if stopped else "")


def shard_ranges(run_id: int, *, size: int) -> list[tuple[int, int]]:
    """Index ranges of at most ``size`` items that still need work.

    An item needs work while one of its epochs lacks a counted result (none
    yet, or one waiting for a retry): a retry or a resume defers only the
    shards that hold such items.
    """
    run = Run.objects.get(pk=run_id)
    epochs = run.epochs
    done = set(
        Result.objects.filter(run_id=run_id, retry_pending=False)
        .values("item_index")
        .annotate(n=Count("id"))
        .filter(n__gte=epochs)
        .values_list("item_index", flat=True)
    )
    items = Item.objects.filter(dataset_id=run.dataset_id)
    if (index_stop := store.run_index_stop(run)) is not None:
        items = items.filter(index__lt=index_stop)  # its first items alone
    needing = [
        index
        for index in items.order_by("index").values_list("index", flat=True)
        if index not in done
    ]
    return [
        (chunk[0], chunk[-1] + 1)
        for chunk in (needing[i : i + size] for i in range(0, len(needing), size))
    ]


def shards_replace(run_id: int, ranges: list[tuple[int, int]]) -> list[RunShard] | None:
    """The run's new shards (its ended ones are forgotten); None while some
    are still pending or running (the run is being executed), or once the run
    has ended (a retry or a resume makes it pending first)."""
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).get(pk=run_id)
        if run.is_final:
            return None
        if RunShard.objects.filter(run_id=run_id, status__in=ACTIVE).exists():
            return None
        RunShard.objects.filter(run_id=run_id).delete()
        return RunShard.objects.bulk_create(
            RunShard(run_id=run_id, start=start, stop=stop) for start, stop in ranges
        )


def shard_job_set(shard_id: int, job_id: int) -> None:
    RunShard.objects.filter(pk=shard_id).update(job_id=job_id)


def shard_claim(shard_id: int, *, executor_id: str = EXECUTOR_ID) -> RunSpec | None:
    """Hold the shard for this executor; None when there is nothing to do.

    Whoever runs the shard's job may take it over: procrastinate gives a job
    to one worker at a time, and gives it to another only once the first is
    seen as stalled. Should the first still be alive, both store the same
    items at worst, and the unique constraint keeps one result of each.
    """
    now = timezone.now()
    with transaction.atomic():
        shard = RunShard.objects.filter(pk=shard_id).first()
        if shard is None:
            return None
        run = Run.objects.select_for_update(no_key=True).get(pk=shard.run_id)
        if run.is_final or run.cancel_requested or _stopped(run.pk):
            return None
        claimed = RunShard.objects.filter(pk=shard_id, status__in=ACTIVE).update(
            status=RunShard.Status.RUNNING,
            worker=executor_id,
            heartbeat_at=now,
            in_flight=0,
            throttle_limit=None,
            claims=F("claims") + 1,
        )
        if not claimed:
            return None
        run.status = RunStatus.RUNNING
        run.heartbeat_at = now
        run.started_at = run.started_at or now
        pass_started = retries.retry_pass_start(run.pk, now)
        # The prices of its first start stay the run's (as store.run_claim).
        if run.prices is None:
            run.prices = price_table().to_json()
        run.save(update_fields=["status", "heartbeat_at", "started_at", "prices"])
    return run_spec(run, started_at=pass_started)


def shard_heartbeat(
    shard_id: int,
    *,
    run_id: int,
    pulse: Pulse = IDLE,
    executor_id: str = EXECUTOR_ID,
) -> RunSignal:
    """Record that the shard is alive, with its ``pulse``; returns whether it
    must stop.

    The run's heartbeat, in-flight count and throttle are its shards': any
    live shard keeps the run alive, what they hold adds up, and the run backs
    off as far as its most throttled shard.
    """
    now = timezone.now()
    with transaction.atomic():
        RunShard.objects.filter(pk=shard_id, worker=executor_id).update(
            heartbeat_at=now, **pulse.columns()
        )
        # Shards whose worker went silent hold nothing any more (it died, or
        # it will be seen as stalled and its items run again).
        alive = now - timedelta(seconds=settings.EVALSITE_STALL_SECONDS)
        live = RunShard.objects.filter(
            run_id=run_id, status=RunShard.Status.RUNNING, heartbeat_at__gte=alive
        ).aggregate(
            held=Sum("in_flight"),
            limit=Min("throttle_limit"),
            latency=Max("call_latency"),
        )
        Run.objects.filter(
            pk=run_id, status__in=[RunStatus.PENDING, RunStatus.RUNNING]
        ).update(
            heartbeat_at=now,
            throttle_limit=live["limit"],
            in_flight=live["held"] or 0,
            call_latency=live["latency"],
        )
        return run_signal(run_id)


def shard_finish(
    shard_id: int,
    *,
    run_id: int,
    cancelled: bool,
    error: str = "",
    drained: bool = False,
    executor_id: str | None = EXECUTOR_ID,
) -> str:
    """End the shard; the last shard of the run ends the run. Returns the
    run's status ("running" while other shards remain).

    An ``error`` (but a drain's, ``drained``: the shared spent figure drains
    the other shards already) stops the run: its other shards stop, and the
    first such error is the run's. Only the shard's holder ends it
    (``executor_id``; None: whoever holds it): an executor whose shard was
    taken over (it was seen as stalled) leaves the end to the one that took it.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).get(pk=run_id)
        return _shard_end(
            run,
            shard_id,
            cancelled=cancelled,
            error=error,
            drained=drained,
            executor_id=executor_id,
        )


def _shard_end(
    run: Run,
    shard_id: int,
    *,
    cancelled: bool,
    error: str,
    drained: bool,
    executor_id: str | None,
) -> str:
    """``shard_finish`` under the run's row lock (``run`` is locked)."""
    stops = bool(error) and not (cancelled or drained)
    stopped_before = _stopped(run.pk)
    shard = RunShard.objects.filter(pk=shard_id, status__in=ACTIVE)
    if executor_id is not None:
        shard = shard.filter(worker__in=[executor_id, ""])
    ended = shard.update(
        status=RunShard.Status.CANCELLED
        if cancelled
        else RunShard.Status.STOPPED
        if stops
        else RunShard.Status.DONE,
        heartbeat_at=timezone.now(),
        in_flight=0,
        throttle_limit=None,
    )
    if run.is_final:
        return run.status
    if not ended and RunShard.objects.filter(pk=shard_id, status__in=ACTIVE):
        return RunStatus.RUNNING  # another executor holds it now
    first_stop = ended and stops and not stopped_before
    if first_stop or (error and not run.error):
        # The first stop is why the run fails, even after a drain's message;
        # any other error is kept when the run has none (a drain lets the
        # other shards go on).
        run.error = error
        Run.objects.filter(pk=run.pk).update(error=error)
    if RunShard.objects.filter(run_id=run.pk, status__in=ACTIVE).exists():
        return RunStatus.RUNNING
    return store.run_finish(
        run.pk,
        cancelled=cancelled,
        error=run.error,
        # A run that a shard stopped fails with that stop, drained or not.
        drained=drained and not stopped_before,
    )


def shard_release(shard_id: int, *, executor_id: str = EXECUTOR_ID) -> bool:
    """Hand the shard back (a worker shutting down): another worker takes it
    at once, and runs only its items without a result."""
    return bool(
        RunShard.objects.filter(
            pk=shard_id, worker=executor_id, status=RunShard.Status.RUNNING
        ).update(
            status=RunShard.Status.PENDING,
            worker="",
            heartbeat_at=None,
            in_flight=0,
            throttle_limit=None,
        )
    )


def shards_cancel(run_id: int) -> tuple[list[int], str | None]:
    """Cancel the run's shards no worker has started; returns the job ids of
    its shards still pending or running (to abort), and the run's final
    status when no shard was running (the run ended here), else None.

    Called once the run's ``cancel_requested`` is stored: a worker can no
    longer claim a shard of it, and a running shard stops by itself.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).get(pk=run_id)
        shards = RunShard.objects.filter(run_id=run_id, status__in=ACTIVE)
        jobs = [job for job in shards.values_list("job_id", flat=True) if job]
        shards.filter(status=RunShard.Status.PENDING).update(
            status=RunShard.Status.CANCELLED
        )
        if run.is_final or shards.filter(status=RunShard.Status.RUNNING).exists():
            return jobs, None
        return jobs, store.run_finish(run_id, cancelled=True)


def run_shard_counts(run_id: int) -> dict[str, int]:
    """How many shards of the run are in each status."""
    counts = dict.fromkeys(RunShard.Status.values, 0)
    for status, n in (
        RunShard.objects.filter(run_id=run_id)
        .values_list("status")
        .annotate(n=Count("id"))
    ):
        counts[status] = n
    return counts


def shard_settle(shard_id: int) -> str | None:
    """End a shard its job could not claim because its run was cancelled,
    stopped by another shard, or has ended; returns the run's status then,
    else None."""
    with transaction.atomic():
        shard = RunShard.objects.filter(pk=shard_id, status__in=ACTIVE).first()
        if shard is None:
            return None
        run = Run.objects.select_for_update(no_key=True).get(pk=shard.run_id)
        cancelled = run.cancel_requested or run.status == RunStatus.CANCELLED
        stopped = not cancelled and _stopped(run.pk)
        if not (cancelled or stopped or run.is_final):
            return None
        return _shard_end(
            run,
            shard_id,
            cancelled=cancelled,
            # It never ran because its run stopped: it ends as stopped too.
            error=run.error if stopped else "",
            drained=False,
            executor_id=None,
        )


def shards_settle_stalled(*, stale_seconds: float) -> list[int]:
    """End the shards of cancelled runs that no worker executes (its worker
    stopped beating, or it was handed back): their job is not retried
    (procrastinate fails an aborted job instead), so nothing else would end
    them. Returns the runs that ended."""
    stale = timezone.now() - timedelta(seconds=stale_seconds)
    ended = []
    for shard_id, run_id in (
        RunShard.objects.filter(status__in=ACTIVE, run__cancel_requested=True)
        .filter(Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True))
        .values_list("pk", "run_id")
    ):
        status = shard_finish(shard_id, run_id=run_id, cancelled=True, executor_id=None)
        if status != RunStatus.RUNNING:
            ended.append(run_id)
    return ended

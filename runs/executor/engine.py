"""The executor: one async function that runs a run, or one shard of it.

Items stream from the database in pages through a bounded queue to a fixed
pool of workers. Each item's attempts run under a timeout and are retried only
for transient failures (``items.py``); its scorers run concurrently. Finished
results go to a bounded buffer that a single writer flushes in batches, at
least every ``FLUSH_INTERVAL`` seconds; progress is announced only after a
batch is stored, so nothing is ever reported done that is not stored.

A run stops early for one of four reasons (``Stop``): a cancel from any
process, its deadline, too many failures (fail fast), or a database that stays
unavailable. A shard of a distributed run stops for these too, and when another
shard stops the run with an error (any of the last three, or an executor
error): that first error is the run's. A process that is shut down stops
without a reason: the run stays ``running`` and resumes later with the items
that have no result. A fifth reason, its cost budget, drains the run instead of
stopping it: no item starts after it, the items in flight finish (their calls
are paid for), and the items never started are left without a result, to run
when the run is resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils import timezone

from runs import events
from runs.analysis.figures import run_figures_store
from runs.calls.limits import use_attempt_timeout, use_call_rate
from runs.calls.pricing import PriceTable, configured_model, use_prices
from runs.errors import ConfigError
from runs.executor import endings, shard_store, store
from runs.executor.buffer import ResultBuffer
from runs.executor.items import ItemRunner, Limits, WorkItem, close_interrupted
from runs.executor.options import RunOptions
from runs.executor.shard_store import RunSignal
from runs.executor.shared_limits import Pacing, limit_key
from runs.executor.stops import (
    Stop,
    StorageUnavailable,
    budget_reached,
    budget_unkeepable,
    fail_fast_error,
    mark_interrupted,
)
from runs.executor.store import Pulse, ResultRecord, RunSpec
from runs.models import Result, RunStatus
from runs.plugins.scorers import build_scorer, conditions_of, scorers_prepare
from runs.plugins.targets import build_target
from runs.pools.shares import owner, scoring_for
from runs.secrets.redaction import NO_SECRETS, Redactor
from runs.secrets.store import arun_scorer_contexts, arun_target_context

logger = logging.getLogger(__name__)

FLUSH_INTERVAL = 0.25
# Each batch pays a commit, the run's counts and tallies once: 100,000
# results with two scores took 2.2-2.4 s of CPU to store in batches of 500,
# 2.0-2.1 s in batches of 1,000 or 2,000 (bench/README, "The batch size").
FLUSH_BATCH = 1000
WATCH_INTERVAL = 0.25
HEARTBEAT_INTERVAL = 2.0
STORAGE_BACKOFF_MAX = 2.0

claim_run = database_sync_to_async(store.run_claim)
heartbeat = database_sync_to_async(store.run_heartbeat)
cancel_requested = database_sync_to_async(store.cancel_requested)
load_item_page = database_sync_to_async(store.item_page)
write_results = database_sync_to_async(store.results_write)
finish_run = database_sync_to_async(store.run_finish)
store_figures = database_sync_to_async(run_figures_store)
run_spent = database_sync_to_async(store.run_spent)
claim_shard = database_sync_to_async(shard_store.shard_claim)
shard_heartbeat = database_sync_to_async(shard_store.shard_heartbeat)
run_signal = database_sync_to_async(shard_store.run_signal)
finish_shard = database_sync_to_async(shard_store.shard_finish)

ERRORED = frozenset({Result.Status.FAILED, Result.Status.TIMED_OUT})


class Execution:
    """One execution of a run (or shard) in this process."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        index_range: tuple[int, int] | None = None,
        shard_id: int | None = None,
    ) -> None:
        self.spec = spec
        self.options = RunOptions.from_dict(spec.options)
        self.index_range = index_range
        # A shard of a distributed run (RunShard): it beats and ends as a shard.
        self.shard_id = shard_id
        self.queue: asyncio.Queue[WorkItem | None] = asyncio.Queue(
            maxsize=self.options.concurrency * 2
        )
        self.buffer = ResultBuffer(
            capacity=max(FLUSH_BATCH, self.options.concurrency * 4)
        )
        self.stop_event = asyncio.Event()
        self.closing = asyncio.Event()  # tells the writer to flush and end
        self.nap: asyncio.Future[None] | None = None  # the writer's sleep
        self.stop_reason: Stop | None = None
        self.stop_error = ""
        self.runner: ItemRunner | None = None
        # Items finished so far and how many failed, for fail fast. Only the
        # event loop's thread changes them, between awaits.
        self.finished = spec.processed
        self.finished_errors = spec.errored
        # Items the workers hold now (attempting, backing off or scoring),
        # reported with the heartbeat.
        self.in_flight = 0
        self.reported_limit: int | None = None
        # What the run has cost, as far as this execution knows (its own
        # finished items on top of the stored cost; the heartbeat adds other
        # executors'), and whether it starts no more items (cost budget).
        self.spent = spec.cost
        self.draining = False
        self.prices = PriceTable.from_json(spec.prices)
        self.pacing: Pacing | None = None
        self.redactor = NO_SECRETS

    # -- stopping ----------------------------------------------------------------

    def request_stop(self, reason: Stop, error: str = "") -> None:
        if self.stop_reason in (None, Stop.BUDGET):
            self.stop_reason, self.stop_error = reason, error
        self.stop_event.set()

    def request_drain(self, reason: Stop, error: str) -> None:
        """Start no more items; let those in flight finish and the run end."""
        if self.stop_reason is None:
            self.stop_reason, self.stop_error = reason, error
        self.draining = True

    def request_cancel(self) -> None:
        self.request_stop(Stop.CANCEL)

    # -- items -------------------------------------------------------------

    async def produce(self) -> None:
        start, stop = store.index_bounds(self.index_range, self.spec.index_stop)
        after = start - 1
        while not self.draining:
            # A page read meets a database restart as a write does: retried
            # until the storage timeout, then the run stops for storage.
            read = functools.partial(
                load_item_page,
                self.spec.dataset_id,
                after_index=after,
                stop_index=stop,
                epochs=self.options.epochs,
                run_id=self.spec.id,
            )
            try:
                page = await self.with_storage(read, "reading items")
            except StorageUnavailable as exc:
                self.request_stop(Stop.STORAGE, str(exc))
                return
            if not page:
                break
            for item, epochs in page:
                for epoch in epochs:
                    if self.draining:
                        break
                    await self.queue.put(WorkItem(item, epoch))
            after = page[-1][0].index
        for _ in range(self.options.concurrency):
            await self.queue.put(None)

    async def work(self) -> None:
        assert self.runner is not None
        while True:
            await self.buffer.wait_not_full()
            work = await self.queue.get()
            if work is None:
                return
            if self.draining:
                continue  # never started: left without a result (skipped)
            record = work.new_record()
            self.in_flight += 1
            try:
                await self.runner.run(work, record)
            except asyncio.CancelledError:
                self.keep_interrupted(record)
                raise
            finally:
                self.in_flight -= 1
            self.buffer.put(record)
            self.wake_writer()
            self.tally(record)

    def keep_interrupted(self, record: ResultRecord) -> None:
        """Store an item cut short by a stop, as what the stop made of it."""
        reason = self.stop_reason
        if reason in (None, Stop.STORAGE):
            return  # shutting down, or nowhere to store it: it will run again
        mark_interrupted(record, reason, self.stop_error)
        # Cut short, perhaps while its attempt was being redacted.
        close_interrupted(record, self.redactor)
        self.buffer.put(record)

    # -- storage -----------------------------------------------------------

    async def with_storage(self, call: Callable[[], Awaitable[Any]], what: str) -> Any:
        """Retry a database call with backoff until the storage timeout passes."""
        deadline = time.monotonic() + self.options.storage_timeout_seconds
        delay = 0.05
        while True:
            try:
                return await call()
            except DatabaseError as exc:
                logger.warning(
                    "run %s: %s failed: %s: %s",
                    self.spec.id,
                    what,
                    type(exc).__name__,
                    exc,
                )
                if time.monotonic() + delay > deadline:
                    seconds = self.options.storage_timeout_seconds
                    raise StorageUnavailable(
                        f"storage unavailable: {what} failed for {seconds:g} s: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, STORAGE_BACKOFF_MAX)

    async def flush(self) -> None:
        batch = await self.buffer.take()
        if not batch:
            return
        await self.with_storage(
            lambda: write_results(self.spec.id, batch), f"writing {len(batch)} results"
        )
        await events.publish_run_update(self.spec.id)

    def wake_writer(self) -> None:
        """Flush now when a whole batch waits, not at the end of the nap.

        Otherwise the writer stores at most a batch per ``FLUSH_INTERVAL``
        (4,000 results a second), and workers wait for room in the buffer.
        """
        nap = self.nap
        if nap is not None and not nap.done() and len(self.buffer) >= FLUSH_BATCH:
            nap.cancel()

    def tally(self, record: ResultRecord) -> None:
        """Count a finished item and stop the run if too many fail (fail fast)."""
        self.spend(record)
        self.finished += 1
        self.finished_errors += record.status in ERRORED
        error = fail_fast_error(self.finished, self.finished_errors, self.options)
        if error:
            self.request_stop(Stop.FAIL_FAST, error)

    # -- cost budget ---------------------------------------------------------

    def spend(self, record: ResultRecord) -> None:
        """Add an item's cost; drain the run when it reaches the budget."""
        budget = self.options.cost_budget
        self.spent += record.cost or 0.0
        if budget is None:
            return
        error = budget_unkeepable(record, budget)
        if error:
            self.request_drain(Stop.BUDGET, error)
            return
        self.check_budget()

    def check_budget(self) -> None:
        budget = self.options.cost_budget
        if budget is None or self.draining or self.spent < budget:
            return
        self.request_drain(Stop.BUDGET, budget_reached(budget, self.spent))

    async def flush_forever(self) -> None:
        """Flush every FLUSH_INTERVAL, or as soon as a batch is full, until
        closed, then once more.

        The writer is closed, never cancelled: a cancelled write that is still
        queued for the database thread would never run, losing its batch.
        """
        while not self.closing.is_set():
            if len(self.buffer) < FLUSH_BATCH:  # else a batch came in meanwhile
                self.nap = asyncio.ensure_future(asyncio.sleep(FLUSH_INTERVAL))
                try:
                    await self.nap
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # the writer itself is cancelled, not just its nap
            await self.flush()
        await self.flush()  # what came in during the last flush

    # -- liveness ------------------------------------------------------------

    async def watch(self) -> None:
        """Notice cancels from any process; keep the heartbeat and throttle fresh."""
        last_beat = time.monotonic()
        while not self.stop_event.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WATCH_INTERVAL):
                    await self.stop_event.wait()
            if self.stop_event.is_set():
                return
            limit = self.throttle_limit()
            due = time.monotonic() - last_beat >= HEARTBEAT_INTERVAL
            try:
                if due or limit != self.reported_limit:
                    last_beat = time.monotonic()
                    signal = await self.beat(limit)
                    if limit != self.reported_limit:
                        self.reported_limit = limit
                        await events.publish_run_update(self.spec.id)
                else:
                    signal = await self.listen()
                if self.options.cost_budget is not None and not self.draining:
                    # Other executors of the run (its shards) spend from the
                    # same budget: read it as often as cancels, not heartbeats.
                    self.spent = max(self.spent, await run_spent(self.spec.id))
                    self.check_budget()
            except DatabaseError as exc:  # the writer decides when storage is gone
                logger.warning("run %s: heartbeat failed: %s", self.spec.id, exc)
                continue
            if signal.cancelled:
                self.request_stop(Stop.CANCEL)
            elif signal.stopped:
                self.request_stop(Stop.OTHER_SHARD, signal.stopped)

    async def keep_pace(self) -> None:
        """Renew the run's leases and take up the back-off other workers
        announced, each watch tick, on a clock of its own.

        Not in ``watch``: its reads of the database may wait seconds (a lock,
        a database under load), and leases left unrenewed for
        ``EVALSITE_STALL_SECONDS`` lapse; other shards would take their places
        while this one's calls still hold them, over the run's concurrency.
        """
        pacing = self.pacing
        assert pacing is not None
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            await pacing.sync()

    async def beat(self, limit: int | None) -> RunSignal:
        concurrency = self.runner.concurrency if self.runner else None
        latency = concurrency.latency if concurrency else None
        pulse = Pulse(
            throttle_limit=limit, in_flight=self.in_flight, call_latency=latency
        )
        if self.shard_id is None:
            return RunSignal(cancelled=await heartbeat(self.spec.id, pulse=pulse))
        return await shard_heartbeat(self.shard_id, run_id=self.spec.id, pulse=pulse)

    async def listen(self) -> RunSignal:
        """Whether the run must stop, between heartbeats."""
        if self.shard_id is None:
            return RunSignal(cancelled=await cancel_requested(self.spec.id))
        return await run_signal(self.spec.id)

    def throttle_limit(self) -> int | None:
        concurrency = self.runner.concurrency if self.runner else None
        return concurrency.limit if concurrency and concurrency.backing_off else None

    async def enforce_deadline(self) -> None:
        deadline = self.options.deadline_seconds
        if deadline is None:
            return
        elapsed = (timezone.now() - self.spec.started_at).total_seconds()
        await asyncio.sleep(max(deadline - elapsed, 0))
        self.request_stop(Stop.DEADLINE, f"the run's deadline of {deadline:g} s passed")

    # -- the whole run ---------------------------------------------------------

    async def execute(self) -> str:
        try:
            context = await self.with_storage(
                lambda: arun_target_context(
                    self.spec.id, self.spec.target_kind, self.spec.target_config
                ),
                "reading the target's secrets",
            )
            target = build_target(
                self.spec.target_kind, self.spec.target_config, context=context
            )
            contexts = await self.with_storage(
                lambda: arun_scorer_contexts(self.spec.id, self.spec.scorers),
                "reading the scorers' secrets",
            )
            scorers = [
                build_scorer(spec, context=contexts.get(spec["name"]))
                for spec in self.spec.scorers
            ]
            await scorers_prepare(scorers)
            # A target that wraps a scorer (the scorer target) prepares it too.
            await target.prepare()
        except ConfigError as exc:
            return await self.finish(error=f"configuration: {exc}")
        # Compiled once per execution, off the loop (tens of milliseconds).
        self.redactor = await asyncio.to_thread(
            Redactor.of, context, *contexts.values()
        )
        # The target's rate and back-off and the run's retry budget, shared
        # with every other executor of any run (shared_limits.py).
        self.pacing = Pacing(
            run_id=self.spec.id,
            key=limit_key(
                self.spec.target_id, self.spec.target_kind, self.spec.target_config
            ),
            options=self.options,
            shard=self.index_range is not None,
        )
        self.runner = ItemRunner(
            target=target,
            scorers=scorers,
            options=self.options,
            conditions=conditions_of(self.spec.scorers),
            prices=self.prices,
            model=configured_model(self.spec.target_config),
            redactor=self.redactor,
            limits=Limits(
                concurrency=self.pacing.concurrency,
                rate=self.pacing.rate,
                budget=self.pacing.budget,
            ),
        )
        await events.publish_run_update(self.spec.id)
        self.check_budget()  # resumed with the budget already spent
        try:
            await self.pacing.sync()  # a target backing off already: start slower
            # Tasks made in here inherit the run's prices (a judge's cost_of),
            # its request rate and timeout (an agent's loop) and its project's
            # share of the scorer workers.
            with (
                use_prices(self.prices),
                use_call_rate(self.pacing.rate),
                use_attempt_timeout(self.options.timeout_seconds),
                scoring_for(owner(self.spec.project_id)),
            ):
                return await self.run_workers()
        finally:
            await self.pacing.aclose()
            await target.aclose()
            for scorer in scorers:
                await scorer.aclose()

    async def run_workers(self) -> str:
        workers = [
            asyncio.create_task(self.work()) for _ in range(self.options.concurrency)
        ]
        producer = asyncio.create_task(self.produce())
        everything = asyncio.gather(producer, *workers)
        watcher = asyncio.create_task(self.watch())
        pace = asyncio.create_task(self.keep_pace())
        flusher = asyncio.create_task(self.flush_forever())
        timer = asyncio.create_task(self.enforce_deadline())
        tasks: tuple[asyncio.Future[Any], ...] = (
            producer,
            *workers,
            everything,
            watcher,
            pace,
            timer,
        )
        first: set[asyncio.Future[Any]] = {everything, watcher, pace, flusher}
        error = ""
        try:
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The process is shutting down, not the user cancelling: keep what
            # finished and leave the run "running" so that it resumes.
            await self.stop(tasks)
            await self.close_writer(flusher)
            raise
        for task in (everything, watcher, pace):
            exc = task.exception() if task.done() else None
            if exc is not None:
                error = f"executor error: {type(exc).__name__}: {exc}"
                logger.error("run %s: %s", self.spec.id, error, exc_info=exc)
        # Workers stop first: what they were doing goes to the buffer, which the
        # writer then stores before it ends.
        await self.stop(tasks)
        writer_error = await self.close_writer(flusher)
        error = error or writer_error
        if self.stop_reason not in (None, Stop.CANCEL):
            error = error or self.stop_error
        return await self.finish(error=error)

    async def close_writer(self, flusher: asyncio.Task[None]) -> str:
        """Let the writer store what is buffered and end; returns its error."""
        self.closing.set()
        if self.nap is not None:
            self.nap.cancel()  # wake it from its sleep, never from a write
        try:
            await flusher
        except StorageUnavailable as exc:
            self.request_stop(Stop.STORAGE, str(exc))
        except Exception as exc:  # the writer's bug must still end the run
            logger.error("run %s: writer failed", self.spec.id, exc_info=exc)
            return f"executor error: {type(exc).__name__}: {exc}"
        return ""

    async def stop(self, tasks: tuple[asyncio.Future[Any], ...]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def finish(self, *, error: str = "") -> str:
        cancelled = self.stop_reason == Stop.CANCEL
        # Drained only when nothing stopped it after the drain began.
        drained = self.stop_reason == Stop.BUDGET and error == self.stop_error
        error = self.redactor.text(error)  # an executor error quotes anything
        if self.shard_id is not None:
            shard_id = self.shard_id
            status = await self.with_storage(
                lambda: finish_shard(
                    shard_id,
                    run_id=self.spec.id,
                    cancelled=cancelled,
                    error=error,
                    drained=drained,
                ),
                "recording the shard's end",
            )
        else:
            status = await self.with_storage(
                lambda: finish_run(
                    self.spec.id,
                    cancelled=cancelled,
                    error=error,
                    shard=self.index_range is not None,
                    drained=drained,
                ),
                "recording the final status",
            )
        if self.shard_id is not None and status == RunStatus.RUNNING:
            await events.publish_run_update(self.spec.id)
            return status  # another shard ends the run
        if self.index_range is None or self.shard_id is not None:
            # Before the run is announced as ended: its page reads them. The
            # run is stored by now: figures the database cannot take are
            # computed on their first read instead.
            with contextlib.suppress(StorageUnavailable):
                await self.with_storage(
                    lambda: store_figures(self.spec.id), "storing the figures"
                )
        await events.publish_run_update(self.spec.id, final=True)
        # Ended, stored and announced: what else is told of it never delays
        # or fails it.
        await endings.arun_ended_tell(self.spec.id)
        return status


async def execute_run(
    run_id: int,
    *,
    index_range: tuple[int, int] | None = None,
    on_start: Callable[[Execution], None] | None = None,
    shard_id: int | None = None,
) -> str | None:
    """Execute a run (or the items with index in ``index_range``) to its end.

    With ``shard_id`` (a ``RunShard`` of the run, whose range it is) the shard
    is claimed, beats and ends on its own; the run ends with its last shard.
    Returns the final status ("running" when a shard ends before the run does),
    or None when another live executor holds the run or the run has ended.
    """
    spec = await (claim_run(run_id) if shard_id is None else claim_shard(shard_id))
    if spec is None:
        return None
    execution = Execution(spec, index_range=index_range, shard_id=shard_id)
    if on_start is not None:
        on_start(execution)
    return await execution.execute()

"""The executor: one async function that runs a run, or one shard of it.

Items stream from the database in pages through a bounded queue to a fixed
pool of workers. Each item's attempts run under a timeout and are retried only
for transient failures; its scorers run concurrently. Finished results go to a
bounded buffer that a single writer flushes in batches, at least every
``FLUSH_INTERVAL`` seconds; progress is announced only after a batch is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils import timezone

from runs import events
from runs.executor import store
from runs.executor.options import RunOptions
from runs.executor.store import ResultRecord, RunSpec, ScoreRecord
from runs.models import ErrorKind, Item, Result
from runs.scorers import Scorer, build_scorer
from runs.targets import ConfigError, Target, TargetError, TargetInput, build_target

logger = logging.getLogger(__name__)

FLUSH_INTERVAL = 0.25
FLUSH_BATCH = 500
WATCH_INTERVAL = 0.25
HEARTBEAT_INTERVAL = 2.0
WRITE_RETRIES = 5
RAW_BODY_LIMIT = 20_000

claim_run = database_sync_to_async(store.run_claim)
heartbeat = database_sync_to_async(store.run_heartbeat)
cancel_requested = database_sync_to_async(store.cancel_requested)
load_item_page = database_sync_to_async(store.item_page)
write_results = database_sync_to_async(store.results_write)
finish_run = database_sync_to_async(store.run_finish)


def error_signature(error_type: str, message: str) -> str:
    """A stable fingerprint of an error: numbers, quoted text and ids folded away."""
    folded = re.sub(r"'[^']*'|\"[^\"]*\"", "<s>", message)
    folded = re.sub(r"0x[0-9a-fA-F]+|\d+(\.\d+)?", "<n>", folded)[:300]
    return hashlib.sha1(f"{error_type}|{folded}".encode()).hexdigest()[:16]


def _now() -> datetime:
    return timezone.now()


@dataclass(slots=True)
class WorkItem:
    item: Item
    epoch: int

    def target_input(self) -> TargetInput:
        return TargetInput(
            index=self.item.index,
            external_id=self.item.external_id,
            input=self.item.input,
            expected=self.item.expected,
            metadata=self.item.metadata or {},
        )


class RunAborted(Exception):
    """The run cannot go on (storage unavailable); its reason becomes the run error."""


class ResultBuffer:
    """Bounded buffer between workers and the single writer."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.records: list[ResultRecord] = []
        self.not_full = asyncio.Condition()

    async def wait_not_full(self) -> None:
        async with self.not_full:
            await self.not_full.wait_for(lambda: len(self.records) < self.capacity)

    def put(self, record: ResultRecord) -> None:
        # Workers wait for room before they start an item, so a finished item
        # never waits here; at most one item per worker overfills.
        self.records.append(record)

    async def take(self) -> list[ResultRecord]:
        async with self.not_full:
            batch, self.records = self.records, []
            self.not_full.notify_all()
        return batch


class Execution:
    """State of one execution of a run (or shard) in this process."""

    def __init__(
        self, spec: RunSpec, *, index_range: tuple[int, int] | None = None
    ) -> None:
        self.spec = spec
        self.options = RunOptions.from_dict(spec.options)
        self.index_range = index_range
        self.queue: asyncio.Queue[WorkItem | None] = asyncio.Queue(
            maxsize=self.options.concurrency * 2
        )
        self.buffer = ResultBuffer(
            capacity=max(FLUSH_BATCH, self.options.concurrency * 4)
        )
        self.user_cancelled = False
        self.cancel_event = asyncio.Event()
        self.random = random.Random()
        self.target: Target | None = None
        self.scorers: list[Scorer] = []

    # -- items -------------------------------------------------------------

    async def produce(self) -> None:
        start, stop = self.index_range or (0, None)
        after = start - 1
        while True:
            page = await load_item_page(
                self.spec.dataset_id,
                after_index=after,
                stop_index=stop,
                epochs=self.options.epochs,
                run_id=self.spec.id,
            )
            if not page:
                break
            for item, epochs in page:
                for epoch in epochs:
                    await self.queue.put(WorkItem(item, epoch))
            after = page[-1][0].index
        for _ in range(self.options.concurrency):
            await self.queue.put(None)

    async def work(self) -> None:
        while True:
            await self.buffer.wait_not_full()
            work = await self.queue.get()
            if work is None:
                return
            self.buffer.put(await self.process(work))

    async def process(self, work: WorkItem) -> ResultRecord:
        item = work.target_input()
        started_at = _now()
        attempts: list[dict[str, Any]] = []
        record = ResultRecord(
            item_id=work.item.pk,
            item_index=work.item.index,
            epoch=work.epoch,
            status=Result.Status.FAILED,
            output=None,
            attempts=attempts,
            started_at=started_at,
            finished_at=started_at,
        )
        try:
            await self.attempt_until_final(item, record)
            if record.status == Result.Status.SUCCEEDED:
                record.scores = await self.score(record.output, item)
        except asyncio.CancelledError:
            if self.user_cancelled:
                if attempts and attempts[-1].get("outcome") is None:
                    attempts[-1].update(
                        outcome="cancelled", finished_at=_now().isoformat()
                    )
                record.status = Result.Status.CANCELLED
                record.error_kind = ErrorKind.CANCELLED
                record.error_type = "Cancelled"
                record.error_message = "run was cancelled while this item was in flight"
                record.finished_at = _now()
                self.buffer.put(record)
            raise
        record.finished_at = _now()
        return record

    async def attempt_until_final(
        self, item: TargetInput, record: ResultRecord
    ) -> None:
        assert self.target is not None
        options = self.options
        for number in range(1, options.max_attempts + 1):
            attempt: dict[str, Any] = {
                "number": number,
                "started_at": _now().isoformat(),
            }
            record.attempts.append(attempt)
            began = time.monotonic()
            retry_after: float | None = None
            try:
                async with asyncio.timeout(options.timeout_seconds):
                    answer = await self.target.generate(item)
            except TimeoutError:
                kind, error_type = ErrorKind.TIMEOUT, "Timeout"
                message = f"attempt exceeded {options.timeout_seconds:g} s"
                attempt.update(outcome="timeout")
                record.status = Result.Status.TIMED_OUT
            except TargetError as exc:
                kind, error_type, message = exc.kind, exc.error_type, exc.message
                retry_after = exc.retry_after
                attempt.update(outcome="error", http_status=exc.http_status)
                if exc.raw_body is not None:
                    attempt["raw_body"] = exc.raw_body[:RAW_BODY_LIMIT]
                record.status = Result.Status.FAILED
            except Exception as exc:  # a target bug must not kill the run: record it
                kind, error_type = ErrorKind.PERMANENT, type(exc).__name__
                message = str(exc) or error_type
                attempt.update(outcome="error")
                record.status = Result.Status.FAILED
            else:
                latency = (time.monotonic() - began) * 1000
                attempt.update(
                    outcome="ok",
                    latency_ms=round(latency, 3),
                    http_status=answer.http_status,
                    finished_at=_now().isoformat(),
                )
                record.status = Result.Status.SUCCEEDED
                record.output = answer.output
                record.latency_ms = latency
                record.prompt_tokens = answer.prompt_tokens
                record.completion_tokens = answer.completion_tokens
                record.cost = answer.cost
                record.error_kind = record.error_type = record.error_message = ""
                record.error_signature = ""
                return
            attempt.update(
                finished_at=_now().isoformat(),
                latency_ms=round((time.monotonic() - began) * 1000, 3),
                error_kind=kind,
                error_type=error_type,
                error_message=message[:2000],
            )
            record.error_kind, record.error_type, record.error_message = (
                kind,
                error_type,
                message,
            )
            record.error_signature = error_signature(error_type, message)
            retryable = kind in (ErrorKind.TRANSIENT, ErrorKind.TIMEOUT)
            if not retryable or number == options.max_attempts:
                return
            await asyncio.sleep(self.backoff(number, retry_after))

    def backoff(self, number: int, retry_after: float | None) -> float:
        """Exponential backoff with full jitter; a server's Retry-After wins."""
        if retry_after is not None:
            return min(retry_after, self.options.backoff_max_seconds)
        ceiling = min(
            self.options.backoff_max_seconds,
            self.options.backoff_base_seconds * 2 ** (number - 1),
        )
        return self.random.uniform(0, ceiling)

    async def score(self, output: Any, item: TargetInput) -> list[ScoreRecord]:
        return list(
            await asyncio.gather(
                *(self.score_one(s, output, item) for s in self.scorers)
            )
        )

    async def score_one(
        self, scorer: Scorer, output: Any, item: TargetInput
    ) -> ScoreRecord:
        try:
            async with asyncio.timeout(self.options.scorer_timeout_seconds):
                outcome = await scorer.score(output=output, item=item)
        except TimeoutError:
            message = f"scorer exceeded {self.options.scorer_timeout_seconds:g} s"
            return ScoreRecord(scorer.name, None, None, error=message)
        except Exception as exc:  # one scorer's error never hides the others
            return ScoreRecord(
                scorer.name, None, None, error=f"{type(exc).__name__}: {exc}"
            )
        return ScoreRecord(
            scorer.name, outcome.value, outcome.passed, reason=outcome.reason
        )

    # -- storage -----------------------------------------------------------

    async def flush(self) -> int:
        batch = await self.buffer.take()
        if not batch:
            return 0
        delay = 0.1
        for attempt in range(1, WRITE_RETRIES + 1):
            try:
                stored = await write_results(self.spec.id, batch)
            except DatabaseError as exc:
                logger.warning(
                    "run %s: write of %d results failed (attempt %d): %s",
                    self.spec.id,
                    len(batch),
                    attempt,
                    exc,
                )
                if attempt == WRITE_RETRIES:
                    raise RunAborted(
                        f"storage unavailable: {type(exc).__name__}: {exc}"
                    ) from exc
                await asyncio.sleep(delay)
                delay *= 2
            else:
                await events.publish_run_update(self.spec.id)
                return stored
        return 0

    async def flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            await self.flush()

    # -- cancellation and liveness -------------------------------------------

    def request_cancel(self) -> None:
        self.cancel_event.set()

    async def watch(self) -> None:
        """Notice a cancel (from any process) and keep the heartbeat fresh."""
        last_beat = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WATCH_INTERVAL):
                    await self.cancel_event.wait()
            if self.cancel_event.is_set():
                break
            if time.monotonic() - last_beat >= HEARTBEAT_INTERVAL:
                last_beat = time.monotonic()
                if await heartbeat(self.spec.id):
                    break
            elif await cancel_requested(self.spec.id):
                break
        self.user_cancelled = True

    # -- the whole run ---------------------------------------------------------

    async def execute(self) -> str:
        try:
            self.target = build_target(self.spec.target_kind, self.spec.target_config)
            self.scorers = [build_scorer(spec) for spec in self.spec.scorers]
        except ConfigError as exc:
            return await self.finish(error=f"configuration: {exc}")
        await events.publish_run_update(self.spec.id)
        try:
            return await self.run_workers()
        finally:
            await self.target.aclose()

    async def run_workers(self) -> str:
        workers = [
            asyncio.create_task(self.work()) for _ in range(self.options.concurrency)
        ]
        producer = asyncio.create_task(self.produce())
        watcher = asyncio.create_task(self.watch())
        flusher = asyncio.create_task(self.flush_forever())
        everything = asyncio.gather(producer, *workers)
        tasks = (producer, *workers, watcher, flusher, everything)
        error = ""
        try:
            done, _ = await asyncio.wait(
                {everything, watcher, flusher}, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            # The process is shutting down, not the user cancelling: keep what
            # finished and leave the run "running" so that it resumes.
            await self.stop(tasks)
            with contextlib.suppress(RunAborted, DatabaseError):
                await self.flush()
            raise
        if flusher in done:
            error = str(flusher.exception() or "the result writer stopped")
        elif everything in done and (exc := everything.exception()) is not None:
            error = f"executor error: {type(exc).__name__}: {exc}"
            logger.error("run %s: %s", self.spec.id, error, exc_info=exc)
        await self.stop(tasks)
        try:
            await self.flush()
        except RunAborted as exc:
            error = error or str(exc)
        return await self.finish(error=error)

    async def stop(self, tasks: tuple[asyncio.Future[Any], ...]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def finish(self, *, error: str = "") -> str:
        status = await finish_run(
            self.spec.id,
            cancelled=self.user_cancelled,
            error=error,
            shard=self.index_range is not None,
        )
        await events.publish_run_update(self.spec.id, final=True)
        return status


async def execute_run(
    run_id: int,
    *,
    index_range: tuple[int, int] | None = None,
    on_start: Any = None,
) -> str | None:
    """Execute a run (or the items with index in ``index_range``) to its end.

    Returns the final status ("running" when a shard ends before the run does),
    or None when another live executor holds the run or the run has ended.
    """
    spec = await claim_run(run_id)
    if spec is None:
        return None
    execution = Execution(spec, index_range=index_range)
    if on_start is not None:
        on_start(execution)
    return await execution.execute()

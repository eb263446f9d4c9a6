"""The distributed mode: runs split into shards, executed as procrastinate jobs.

The launcher (web servers, ``evalrun``) never executes anything: it splits a
run's items that need work into shards (``RunShard``, index ranges of at most
``EVALSITE_SHARD_SIZE`` items) and defers one job per shard. ``manage.py
evalworker`` processes execute the jobs with the executor's one function,
``execute_run(run_id, index_range=..., shard_id=...)``.

What can go wrong, and what happens then:

- a cancel aborts the run's jobs: a queued one never starts, a running one
  stops its shard as a cancel does (in-flight requests closed, finished
  results kept), and the run ends with its last shard;
- a shard that stops the run with an error (fail fast, the deadline, storage,
  an executor error) stops the others as a single process stops: the running
  ones within a second (their in-flight items kept as cancelled), the queued
  ones end without calling the target, and the run fails with that error;
- a worker stopped (SIGTERM) finishes its shards, up to the grace period, then
  hands them back; a second signal hands them back at once. A handed-back
  shard is retried by another worker, which runs only its items without a
  result;
- a worker killed (SIGKILL) stops beating: once it is stalled, the stalled-job
  recovery of every other worker retries its jobs, as procrastinate's
  documentation describes. A crash repeats at most the items that the shard
  held in flight or in its unflushed buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import time
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError, transaction
from procrastinate import JobContext, RetryStrategy
from procrastinate.contrib.django import app
from procrastinate.contrib.django.django_connector import DjangoConnector
from procrastinate.job_context import AbortReason
from procrastinate.worker import Worker

from runs import events
from runs.executor import endings, rescore_store, shard_store, store
from runs.executor.engine import Execution, execute_run
from runs.executor.rescore import execute_scoring_pass
from runs.executor.stops import StorageUnavailable

logger = logging.getLogger(__name__)

TASK_NAME = "evalsite.execute_shard"
PASS_TASK_NAME = "evalsite.execute_scoring_pass"


class PassNotClaimed(Exception):
    """Another executor holds the pass: the job asks again later."""


class ShardHandedBack(Exception):
    """The worker stopped before the shard ended: another worker takes it."""


# Shards this process executes now, by shard id: a second stop signal hands
# them all back at once.
_running: dict[int, asyncio.Task[str | None]] = {}

release_shard = database_sync_to_async(shard_store.shard_release)
settle_shard = database_sync_to_async(shard_store.shard_settle)
end_shard = database_sync_to_async(shard_store.shard_finish)
pass_held_elsewhere = database_sync_to_async(rescore_store.pass_running)


@app.task(
    name=TASK_NAME,
    pass_context=True,
    # Only a hand-back or a database outage is retried; an executor error has
    # already ended the shard (and failed the run) before it gets here.
    retry=RetryStrategy(
        max_attempts=1000,
        wait=1,
        retry_exceptions={ShardHandedBack, DatabaseError, StorageUnavailable},
    ),
)
async def execute_shard(
    context: JobContext, *, run_id: int, shard_id: int, start: int, stop: int
) -> str | None:
    execution: list[Execution] = []
    inner = asyncio.ensure_future(
        execute_run(
            run_id,
            index_range=(start, stop),
            shard_id=shard_id,
            on_start=execution.append,
        )
    )
    _running[shard_id] = inner
    try:
        while True:
            try:
                status = await asyncio.shield(inner)
                break
            except asyncio.CancelledError:
                cancel = context.abort_reason() == AbortReason.USER_REQUEST
                if cancel and execution and not inner.done():
                    # A cancel: the shard stops as the run's cancel stops it
                    # (results kept), and ends; wait for that.
                    execution[0].request_cancel()
                    continue
                await _hand_back(inner, shard_id)
                if cancel:  # cancelled before it started: it ends here
                    return await _settled(shard_id, run_id)
                raise ShardHandedBack(f"shard {shard_id} of run {run_id}") from None
    except (ShardHandedBack, DatabaseError, StorageUnavailable):
        raise  # the job is retried; the shard goes on where it stopped
    except Exception as exc:
        # A bug must not leave the shard running forever: it stops the run,
        # which fails with the error. Only while this worker holds the shard
        # (or nobody does): a shard another worker took over is its own.
        logger.error("shard %s of run %s crashed", shard_id, run_id, exc_info=exc)
        await end_shard(
            shard_id,
            run_id=run_id,
            cancelled=False,
            error=f"executor error: {type(exc).__name__}: {exc}",
            executor_id=store.EXECUTOR_ID,
        )
        raise
    finally:
        _running.pop(shard_id, None)
    if status is None:
        # Not claimed: its run was cancelled, stopped by another shard or
        # ended (or another worker ended the shard before this job was retried).
        return await _settled(shard_id, run_id)
    return status


async def _settled(shard_id: int, run_id: int) -> str | None:
    """Settle a shard that never ran; a run it ended is told of as ended."""
    status = await settle_shard(shard_id)
    if status is not None and status != "running":
        await endings.arun_ended_tell(run_id)
    return status


@app.task(
    name=PASS_TASK_NAME,
    retry=RetryStrategy(
        max_attempts=1000, wait=1, retry_exceptions={DatabaseError, PassNotClaimed}
    ),
)
async def execute_pass(*, pass_id: int) -> str | None:
    """A scoring pass (a re-score) on a worker."""
    status = await execute_scoring_pass(pass_id)
    if status is None and await pass_held_elsewhere(pass_id):
        # Held by an executor that may have died (a SIGKILLed worker): ask
        # again until it is taken over (stale heartbeat) or has ended.
        raise PassNotClaimed(f"scoring pass {pass_id}")
    return status


async def _hand_back(inner: asyncio.Task[str | None], shard_id: int) -> None:
    """Stop the shard's execution (what it stored stays) and release it."""
    inner.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await inner
    with contextlib.suppress(DatabaseError):
        await release_shard(shard_id)


def hand_back_all() -> None:
    """A second stop signal: stop every shard of this process now."""
    for task in list(_running.values()):
        task.cancel()


# -- the launcher ---------------------------------------------------------------


class ProcrastinateLauncher:
    """Defers runs as shard jobs; executes nothing in this process."""

    def launch(self, run_id: int) -> None:
        ranges = shard_store.shard_ranges(run_id, size=settings.EVALSITE_SHARD_SIZE)
        deferrer = app.configure_task(TASK_NAME, queue=settings.EVALSITE_QUEUE)
        ended = False
        with transaction.atomic():
            shards = shard_store.shards_replace(run_id, ranges)
            if shards is None:
                return  # its shards are being executed, or it has ended
            if not shards:
                # Nothing needs work (every item has its results): it ends now.
                store.run_finish(run_id, cancelled=False)
                ended = True
            for shard in shards:
                # In this transaction: a shard exists with its job, or neither.
                job_id = deferrer.defer(
                    run_id=run_id, shard_id=shard.pk, start=shard.start, stop=shard.stop
                )
                shard_store.shard_job_set(shard.pk, job_id)
        if ended:
            events.publish_run_update_sync(run_id, final=True)
            endings.run_ended_tell(run_id)

    def cancel(self, run_id: int) -> None:
        """Abort the run's jobs: queued ones never start, running ones stop."""
        jobs, final = shard_store.shards_cancel(run_id)
        for job_id in jobs:
            app.job_manager.cancel_job_by_id(job_id, abort=True)
        if final is not None:
            events.publish_run_update_sync(run_id, final=True)
            endings.run_ended_tell(run_id)

    def launch_scoring_pass(self, pass_id: int) -> None:
        # A re-score calls judges and runs code in sandboxes: a worker's work,
        # not a web server's. One job per pass (its writes replace scores by
        # scorer name, so a pass taken over from a dead worker starts over).
        app.configure_task(PASS_TASK_NAME, queue=settings.EVALSITE_QUEUE).defer(
            pass_id=pass_id
        )


# -- the worker -------------------------------------------------------------------


# A procrastinate worker prunes the rows of silent workers when it starts; ours
# start again after every database outage, when every heartbeat is old, live
# workers' too. Pruned, a live worker's running jobs would be run again: the
# pruning is left to ``recover_stalled``, which knows when it may judge.
PRUNE_AT_START_SECONDS = 24 * 3600.0

UPTIME_QUERY = (
    "SELECT EXTRACT(EPOCH FROM clock_timestamp() - pg_postmaster_start_time()) "
    "AS seconds"
)


async def recover_stalled(worker_app: Any, *, stall_seconds: float) -> None:
    """Retry the jobs of stalled workers, periodically (procrastinate's recipe).

    Every worker runs it; a job retried twice at once is harmless (the retry
    is a conditional update of a job still ``doing``).
    """
    # Since when the database has answered this recovery (judged at once on
    # start; None after a failure, until it answers again).
    answering_since: float | None = -math.inf
    while True:
        await asyncio.sleep(stall_seconds / 2)
        now = time.monotonic()
        since = now if answering_since is None else answering_since
        try:
            await recovery_pass(
                worker_app, stall_seconds=stall_seconds, answering_for=now - since
            )
        except Exception as exc:  # the database may be restarting: try again
            answering_since = None
            logger.warning(
                "stalled-job recovery failed: %s: %s", type(exc).__name__, exc
            )
            continue
        if answering_since is None:
            answering_since = now


async def recovery_pass(
    worker_app: Any, *, stall_seconds: float, answering_for: float = math.inf
) -> bool:
    """Retry the jobs of workers silent for ``stall_seconds``; returns whether
    it judged them.

    A worker is judged only by heartbeats it could have sent: once the
    database has answered for a whole stall period, since its server started
    and for as long as this recovery saw (``answering_for``). Right after a
    restart or an outage every heartbeat is old, live workers' too, and
    retrying their jobs would run them twice.
    """
    row = await worker_app.connector.execute_query_one_async(UPTIME_QUERY)
    if min(float(row["seconds"]), answering_for) < stall_seconds:
        return False
    manager = worker_app.job_manager
    for job in await manager.get_stalled_jobs(
        queue=settings.EVALSITE_QUEUE, seconds_since_heartbeat=stall_seconds
    ):
        logger.warning("job %s: its worker is stalled, retrying it", job.id)
        await manager.retry_job(job)
    await manager.prune_stalled_workers(stall_seconds)
    settle = database_sync_to_async(shard_store.shards_settle_stalled)
    for run_id in await settle(stale_seconds=stall_seconds):
        await events.publish_run_update(run_id, final=True)
        await endings.arun_ended_tell(run_id)
    return True


async def run_worker(*, shards: int, queues: list[str]) -> None:
    """Run a procrastinate worker until it is stopped (SIGTERM or SIGINT).

    The first signal stops it gracefully: its shards finish, or are handed
    back after ``EVALSITE_WORKER_GRACE_SECONDS``; a second one hands them
    back at once. A worker that stops by itself (its database went away:
    procrastinate stops a worker whose heartbeat or listener fails) starts
    again, with backoff, once the database answers.
    """
    stall = float(settings.EVALSITE_STALL_SECONDS)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    current: list[Worker] = []

    def on_signal() -> None:
        if stopping.is_set():
            hand_back_all()
            return
        stopping.set()
        for worker in current:
            worker.stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    delay = 0.5
    # The Django integration's app runs on Django's connector.
    connector = app.connector
    assert isinstance(connector, DjangoConnector)
    with app.replace_connector(connector.get_worker_connector()) as worker_app:
        # The tasks of PROCRASTINATE_IMPORT_PATHS (alerts' too), as
        # run_worker_async would import them.
        worker_app.perform_import_paths()
        async with worker_app.open_async():
            recovery = asyncio.create_task(
                recover_stalled(worker_app, stall_seconds=stall)
            )
            try:
                while not stopping.is_set():
                    worker = Worker(
                        worker_app,
                        queues=queues,
                        concurrency=shards,  # one procrastinate job is one shard
                        name=store.EXECUTOR_ID,
                        install_signal_handlers=False,
                        update_heartbeat_interval=stall / 3,
                        stalled_worker_timeout=PRUNE_AT_START_SECONDS,
                        shutdown_graceful_timeout=settings.EVALSITE_WORKER_GRACE_SECONDS,
                        fetch_job_polling_interval=1.0,
                        abort_job_polling_interval=1.0,
                        delete_jobs="successful",
                    )
                    current[:] = [worker]
                    try:
                        await worker.run()
                        delay = 0.5
                    except Exception as exc:
                        logger.warning(
                            "worker stopped: %s: %s", type(exc).__name__, exc
                        )
                    if not stopping.is_set():
                        logger.warning("worker starting again in %.1f s", delay)
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(delay):
                                await stopping.wait()
                        delay = min(delay * 2, 10.0)
            finally:
                recovery.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await recovery

"""Deliveries sent off the run's path: a channel that is down never delays a run.

In the embedded mode deliveries are sent from a loop of their own, in a
daemon thread of this process (not the server's loop, nor the runs'): back-off
waits and slow receivers hold nothing else. Pending deliveries are rows with
the time they are due (``delivery.py``); the loop's sweep takes up those that
are due, waits for the next, and ends once none is waiting. It starts when a
delivery is made, and when the server starts: deliveries a stopped process
left waiting out a back-off are sent then. Several processes may sweep at
once: each attempt is made by one of them alone. In the distributed mode each
attempt is a procrastinate job (``runs.alerts.tasks``) that a worker
executes; a worker that dies mid-delivery has its job retried, which goes on
from the attempts already logged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
from collections.abc import Coroutine, Iterable
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError, transaction

from runs.alerts.delivery import attempt_next, deliveries_due
from runs.pools.loops import LoopOwner

logger = logging.getLogger(__name__)

# The longest the sweep sleeps while deliveries wait: one another process
# holds may come due sooner (its process gone), and the database may be back.
SWEEP_SECONDS = 30.0

due_now = database_sync_to_async(deliveries_due)


class Sender(LoopOwner):
    """A loop in a daemon thread that sends the due deliveries (and runs
    other alert work) as tasks."""

    def __init__(self) -> None:
        super().__init__("evalsite-alerts")
        self.futures: set[concurrent.futures.Future[Any]] = set()
        # On the loop: the sweep, what wakes it, the attempts it started.
        self.sweep: asyncio.Task[None] | None = None
        self.nudge: asyncio.Event | None = None
        self.sending: dict[int, asyncio.Task[Any]] = {}
        # Nothing due or in flight (read from other threads, as ``busy``), and
        # wakes asked for that the loop has not seen yet.
        self.idle = True
        self.wakes = 0

    def submit(self, work: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        # A fresh context: a request's must not follow the delivery.
        future = contextvars.Context().run(
            asyncio.run_coroutine_threadsafe, work, self._ensure_loop()
        )
        self.futures.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        self.futures.discard(future)
        if not future.cancelled() and (exc := future.exception()) is not None:
            logger.error("alert work crashed: %s", exc, exc_info=exc)

    # -- deliveries ------------------------------------------------------------

    def wake(self) -> None:
        """Send the deliveries that are due now, and the others when due."""
        with self.lock:
            self.wakes += 1
        self._ensure_loop().call_soon_threadsafe(
            self._wake, context=contextvars.Context()
        )

    def _wake(self) -> None:
        if self.nudge is None:
            self.nudge = asyncio.Event()
        self.idle = False
        with self.lock:
            self.wakes -= 1
        self.nudge.set()
        if self.sweep is None or self.sweep.done():
            self.sweep = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        assert self.nudge is not None
        while True:
            self.nudge.clear()
            try:
                due, wait = await due_now(exclude=set(self.sending))
            except DatabaseError as exc:
                logger.warning("alert deliveries could not be read: %s", exc)
                due, wait = [], SWEEP_SECONDS
            for delivery_id in due:
                self._send(delivery_id)
            if not self.sending and not due:
                self.idle = True
                if wait is None:
                    return  # nothing waits: woken again by the next delivery
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(wait or SWEEP_SECONDS, SWEEP_SECONDS)):
                    await self.nudge.wait()
            self.idle = False

    def _send(self, delivery_id: int) -> None:
        task = asyncio.get_running_loop().create_task(attempt_next(delivery_id))
        self.sending[delivery_id] = task
        task.add_done_callback(lambda t: self._sent(delivery_id, t))

    def _sent(self, delivery_id: int, task: asyncio.Task[Any]) -> None:
        self.idle = False  # before it leaves ``sending``: never idle between
        self.sending.pop(delivery_id, None)
        if self.nudge is not None:
            self.nudge.set()  # its next attempt may be due at once
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error(
                "alert delivery %s crashed: %s", delivery_id, exc, exc_info=exc
            )

    def stop(self) -> None:
        """Stop sending (the attempts in flight are cut short): what a process
        that stops leaves, due again once their hold has passed."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), loop).result(timeout=30)

    async def _stop(self) -> None:
        tasks = [task for task in (self.sweep, *self.sending.values()) if task]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.sending.clear()
        self.idle = True

    @property
    def busy(self) -> int:
        """Alert work under way, and deliveries due or in flight, in this process."""
        return len(self.futures) + len(self.sending) + (not self.idle) + self.wakes


sender = Sender()


def deliveries_start() -> None:
    """Send the deliveries left waiting (a server starting, in the embedded mode)."""
    sender.wake()


def _send_now(delivery_ids: list[int]) -> None:
    if settings.EVALSITE_EXECUTOR == "procrastinate":
        # procrastinate's Django app exists only on PostgreSQL installations.
        from runs.alerts.tasks import defer_delivery

        for delivery_id in delivery_ids:
            defer_delivery(delivery_id)
        return
    sender.wake()


def deliver_later(delivery_ids: Iterable[int]) -> None:
    """Send the deliveries once the current transaction commits, elsewhere."""
    ids = list(delivery_ids)
    if ids:
        transaction.on_commit(lambda: _send_now(ids))


def run_later(work: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    """Run ``work`` (an alert's findings, say) on the alerts' loop."""
    return sender.submit(work)

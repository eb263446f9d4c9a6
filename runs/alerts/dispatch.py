"""Deliveries sent off the run's path: a channel that is down never delays a run.

In the embedded mode deliveries run as asyncio tasks on a loop of their own,
in a daemon thread of this process (not the server's loop, nor the runs'):
back-off waits and slow receivers hold nothing else. In the distributed mode
each delivery is a procrastinate job (``runs.alerts.tasks``) that a worker
executes; a worker that dies mid-delivery has its job retried, which goes on
from the attempts already logged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Coroutine, Iterable
from typing import Any

from django.conf import settings
from django.db import transaction

from runs.alerts.delivery import deliver

logger = logging.getLogger(__name__)


class Sender:
    """A loop in a daemon thread that runs deliveries as tasks."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lock = threading.Lock()
        self.futures: set[concurrent.futures.Future[Any]] = set()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None or self.loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="evalsite-alerts", daemon=True
                )
                thread.start()
                self.loop = loop
            return self.loop

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
            logger.error("alert delivery crashed: %s", exc, exc_info=exc)

    @property
    def busy(self) -> int:
        return len(self.futures)


sender = Sender()


def _send_now(delivery_ids: list[int]) -> None:
    if settings.EVALSITE_EXECUTOR == "procrastinate":
        # procrastinate's Django app exists only on PostgreSQL installations.
        from runs.alerts.tasks import defer_delivery

        for delivery_id in delivery_ids:
            defer_delivery(delivery_id)
        return
    for delivery_id in delivery_ids:
        sender.submit(deliver(delivery_id))


def deliver_later(delivery_ids: Iterable[int]) -> None:
    """Send the deliveries once the current transaction commits, elsewhere."""
    ids = list(delivery_ids)
    if ids:
        transaction.on_commit(lambda: _send_now(ids))


def run_later(work: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    """Run ``work`` (an alert's findings, say) on the alerts' loop."""
    return sender.submit(work)

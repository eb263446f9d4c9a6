"""Live progress of one run over a websocket, as htmx out-of-band fragments.

The database is the truth and events are hints: on connect the consumer sends
a snapshot read from the database; after a ``run.update`` event it reads the
database again and sends the progress block plus the rows stored since the
last message. A run executed by another process may have no shared channel
layer to announce itself on, so while no event arrives the consumer polls the
database and sends an update when something changed.

Updates are coalesced: however many events arrive (one per stored batch, from
every executor of the run), a page gets at most one update per
``SEND_INTERVAL``, read after the last event that asked for it, so the last
state always reaches it. The run's end is sent at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, cast

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import User
from django.db import DatabaseError
from django.template.loader import render_to_string

from runs.errors import NotFound
from runs.events import run_group
from runs.models import Run
from runs.results.selectors import result_latest, run_get, run_overview

logger = logging.getLogger(__name__)

POLL_INTERVAL = 1.5
SEND_INTERVAL = 0.5  # the least time between two updates of one page
SNAPSHOT_ROWS = 20
UPDATE_ROWS = 50  # the most result rows one live update carries


@dataclass(frozen=True, slots=True)
class LiveUpdate:
    html: str
    rows_html: str | None  # a separate message: see _live_rows.html
    last_result_id: int
    state: tuple[Any, ...]  # what the poller compares to notice a change
    final: bool


def _state_of(run: Run) -> tuple[Any, ...]:
    """The figures whose change is worth a message."""
    return (
        run.status,
        run.succeeded,
        run.failed,
        run.timed_out,
        run.cancelled,
        run.cancel_requested,
        run.heartbeat_at,
        run.throttle_limit,
        run.error,
    )


def run_state(user: User, run_id: int) -> tuple[Any, ...]:
    """The run's current figures, if the user may see it (else NotFound)."""
    return _state_of(run_get(user=user, run_id=run_id))


def live_update(
    user: User,
    run_id: int,
    *,
    after_id: int,
    snapshot: bool,
) -> LiveUpdate:
    """Render the progress block and the rows stored after ``after_id``."""
    overview = run_overview(user=user, run_id=run_id)
    run = overview.run
    rows = result_latest(
        run=run,
        after_id=0 if snapshot else after_id,
        limit=SNAPSHOT_ROWS if snapshot else UPDATE_ROWS,
    )
    context = {
        "overview": overview,
        "rows": rows,
        "snapshot": snapshot,
        "show_epoch": run.epochs > 1,
    }
    return LiveUpdate(
        html=render_to_string("runs/results/_live_update.html", context),
        rows_html=(
            render_to_string("runs/results/_live_rows.html", context).strip()
            if rows or snapshot
            else None
        ),
        last_result_id=max([after_id, *(r.pk for r in rows)]),
        state=_state_of(run),
        final=run.is_final,
    )


read_state = database_sync_to_async(run_state)
read_update = database_sync_to_async(live_update)


async def wait_for(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``."""
    if seconds > 0 and not event.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()
    return event.is_set()


class RunConsumer(AsyncWebsocketConsumer):
    poll_interval = POLL_INTERVAL
    send_interval = SEND_INTERVAL

    async def connect(self) -> None:
        self.run_id: int = self.scope["url_route"]["kwargs"]["run_id"]
        self.last_result_id = 0
        self.state: tuple[Any, ...] = ()
        self.final = False
        self.asked = asyncio.Event()  # an event asked for an update
        self.ended = asyncio.Event()  # an event said the run has ended
        self.follower: asyncio.Task[None] | None = None
        self.joined = False
        self.last_sent = 0.0
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        # AuthMiddleware's lazy object stands for the signed-in user.
        self.user = cast(User, user)
        try:
            await read_state(self.user, self.run_id)
        except NotFound:
            await self.close()
            return
        await self.channel_layer.group_add(run_group(self.run_id), self.channel_name)
        self.joined = True
        await self.accept()
        if await self.send_update(snapshot=True) and not self.final:
            self.follower = asyncio.create_task(self.follow())

    async def disconnect(self, code: int) -> None:
        if self.follower is not None:
            self.follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.follower
        if self.joined:
            await self.channel_layer.group_discard(
                run_group(self.run_id), self.channel_name
            )

    async def run_update(self, event: dict[str, Any]) -> None:
        """A hint that results were stored: the follower sends an update.

        Returns at once, so that a flood of events never queues reads of the
        database: all the events of an interval make one update.
        """
        self.asked.set()
        if event.get("final"):
            self.ended.set()

    async def send_update(self, *, snapshot: bool = False) -> bool:
        """Read the run and send it; False when the page may no longer see it."""
        try:
            update = await read_update(
                self.user,
                self.run_id,
                after_id=self.last_result_id,
                snapshot=snapshot,
            )
        except NotFound:  # the user lost access, or the run is gone
            await self.close()
            return False
        self.last_result_id = update.last_result_id
        self.state = update.state
        self.final = update.final
        self.last_sent = asyncio.get_running_loop().time()
        await self.send(text_data=update.html)
        if update.rows_html is not None:
            await self.send(text_data=update.rows_html)
        return True

    async def follow(self) -> None:
        """Send the updates events ask for, at most one per ``send_interval``;
        poll the database while none arrives (executors without a shared
        channel layer)."""
        loop = asyncio.get_running_loop()
        while not self.final:
            if await wait_for(self.asked, self.poll_interval):
                wait = self.last_sent + self.send_interval - loop.time()
                await wait_for(self.ended, wait)  # the end goes at once
            elif not await self.changed():
                continue
            # Cleared before the read: an event that arrives during it asks
            # for one more update, after the interval.
            self.asked.clear()
            try:
                if not await self.send_update():
                    return
            except DatabaseError as exc:  # a busy database: try again next time
                self.failed(exc)

    async def changed(self) -> bool:
        """Whether the run's figures changed since the last update (polling)."""
        try:
            return await read_state(self.user, self.run_id) != self.state
        except NotFound:
            await self.close()
            self.final = True  # nothing more to follow
            return False
        except DatabaseError as exc:  # a busy database: try again next time
            self.failed(exc)
            return False

    def failed(self, exc: DatabaseError) -> None:
        logger.warning(
            "run %s: progress read failed: %s: %s",
            self.run_id,
            type(exc).__name__,
            exc,
        )

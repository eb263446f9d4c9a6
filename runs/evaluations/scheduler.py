"""The embedded mode's scheduler: a loop on the server's event loop.

It ticks the schedules once when the server starts (ticks missed while no
server ran make one catch-up run each), then after each minute turns. Several
servers may run it at once: each tick is taken by one of them alone
(``schedules.schedule_tick``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from datetime import datetime

from channels.db import database_sync_to_async
from django.utils import timezone

from runs.evaluations.schedules import schedules_tick

logger = logging.getLogger(__name__)

# After the minute turns: the tick of that minute is due by then.
AFTER_MINUTE_SECONDS = 1.0

tick_all = database_sync_to_async(schedules_tick)

_task: list[asyncio.Task[None]] = []


def seconds_to_next_minute(now: datetime) -> float:
    into = now.second + now.microsecond / 1e6
    return 60.0 - into + AFTER_MINUTE_SECONDS


async def schedules_forever() -> None:
    while True:
        try:
            await tick_all(now=timezone.now())
        except Exception:  # the database may be away: try at the next minute
            logger.exception("the schedules could not be ticked")
        await asyncio.sleep(seconds_to_next_minute(timezone.now()))


def _start() -> None:
    if not _task or _task[0].done():
        _task[:] = [asyncio.get_running_loop().create_task(schedules_forever())]


def schedules_start(loop: asyncio.AbstractEventLoop) -> None:
    """Run the schedules on ``loop`` (the server's) from now on."""
    loop.call_soon_threadsafe(_start, context=contextvars.Context())


def _stop() -> None:
    for task in _task:
        task.cancel()
    _task.clear()


def schedules_stop(loop: asyncio.AbstractEventLoop) -> None:
    """Stop running the schedules on ``loop``."""
    loop.call_soon_threadsafe(_stop)

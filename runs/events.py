"""The one module that talks to the channel layer.

Events are hints that something changed; receivers read the truth from the
database. A broken channel layer never stops a run.

Progress is announced at most once per ``PUBLISH_INTERVAL`` per run and
process, however often an executor stores a batch: an announcement asked for
sooner is sent once the interval has passed (one for all asked meanwhile), so
the last change is always announced. A run's end is announced at once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from runs.records.installation import database_id

logger = logging.getLogger(__name__)

RUN_UPDATE = "run.update"
PUBLISH_INTERVAL = 0.25  # seconds between two progress events of a run
PACES_KEPT = 256  # runs whose last announcement is remembered, per process


def run_group(run_id: int) -> str:
    """The channel-layer group of a run's events: of this installation's
    database, as run ids repeat from one installation to another that shares
    the Redis (their pages would hear each other's runs)."""
    return f"run-{database_id()}-{run_id}"


@dataclass(slots=True)
class Pace:
    """When a run's progress was last announced, and the announcement due."""

    last: float
    due: asyncio.TimerHandle | None = None
    loop: asyncio.AbstractEventLoop | None = None


paces: dict[int, Pace] = {}
sending: set[asyncio.Task[None]] = set()  # due announcements under way


async def send_run_update(run_id: int, *, final: bool = False) -> None:
    """Announce now, whatever the pace."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(
            run_group(run_id), {"type": RUN_UPDATE, "run_id": run_id, "final": final}
        )
    except Exception as exc:  # each channel layer backend raises its own types
        logger.warning(
            "run %s: progress event not sent: %s: %s", run_id, type(exc).__name__, exc
        )


def forget_idle(now: float) -> None:
    """Keep the memory of paces bounded: drop runs with nothing due."""
    if len(paces) < PACES_KEPT:
        return
    for run_id, pace in list(paces.items()):
        if pace.due is None and now - pace.last >= PUBLISH_INTERVAL:
            del paces[run_id]


def send_due(run_id: int, pace: Pace) -> None:
    loop = asyncio.get_running_loop()
    pace.due = None
    pace.last = loop.time()
    task = loop.create_task(send_run_update(run_id))
    sending.add(task)
    task.add_done_callback(sending.discard)


async def publish_run_update(run_id: int, *, final: bool = False) -> None:
    """Announce that a run's stored progress changed, at the run's pace."""
    loop = asyncio.get_running_loop()
    if final:
        pace = paces.pop(run_id, None)
        if pace is not None and pace.due is not None:
            pace.due.cancel()
        await send_run_update(run_id, final=True)
        return
    pace = paces.get(run_id)
    if pace is not None and pace.due is not None and pace.loop is loop:
        return  # an announcement is due: it tells of this change too
    now = loop.time()
    if pace is None or pace.loop is not loop:
        forget_idle(now)
        pace = paces[run_id] = Pace(last=now - PUBLISH_INTERVAL, loop=loop)
    wait = pace.last + PUBLISH_INTERVAL - now
    if wait > 0:
        pace.due = loop.call_later(wait, send_due, run_id, pace)
        return
    pace.last = now
    await send_run_update(run_id)


def publish_run_update_sync(run_id: int, *, final: bool = False) -> None:
    """Announce from synchronous code, at once: its event loop ends with the
    call, so nothing can be left due on it."""
    async_to_sync(send_run_update)(run_id, final=final)

"""The distributed mode's scheduler: a procrastinate periodic job each minute.

Every ``evalworker`` runs procrastinate's periodic deferrer; procrastinate
defers the job once per minute whatever the number of workers, and the tick
rows (``schedules.schedule_tick``) make a tick start at most one run anyway.
Imported by ``evalworker`` (procrastinate's app exists on PostgreSQL alone).
"""

from __future__ import annotations

from datetime import UTC, datetime

from channels.db import database_sync_to_async
from django.conf import settings
from procrastinate.contrib.django import app

from runs.evaluations.schedules import schedules_tick

TASK_NAME = "evalsite.evaluation_schedules"
PERIODIC_ID = "evaluation-schedules"
EVERY_MINUTE = "* * * * *"

tick_all = database_sync_to_async(schedules_tick)


@app.periodic(cron=EVERY_MINUTE, periodic_id=PERIODIC_ID)
@app.task(name=TASK_NAME, queue=settings.EVALSITE_QUEUE)
async def evaluation_schedules(timestamp: int) -> int:
    """Tick every schedule as of the minute procrastinate deferred this for
    (or later, when the job waited); returns the ticks taken."""
    now = max(datetime.fromtimestamp(timestamp, tz=UTC), datetime.now(tz=UTC))
    return len(await tick_all(now=now))

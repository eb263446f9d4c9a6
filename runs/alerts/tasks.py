"""The distributed mode's delivery job: one attempt per job.

A job makes the delivery's next attempt (bounded by
``EVALSITE_ALERT_TIMEOUT_SECONDS``) and, when another is due, defers the
next job after the back-off: no worker slot waits out a back-off, so a
channel that is down holds the shards of runs back by one attempt at most.
A job retried after its worker died goes on from the attempts logged, once
the dead worker's hold on its attempt has passed (a job that finds the
attempt held defers itself to then).
"""

from __future__ import annotations

import math

from django.conf import settings
from procrastinate import App, JobContext
from procrastinate.contrib.django import app
from procrastinate.jobs import JobDeferrer

from runs.alerts.delivery import attempt_next

TASK_NAME = "evalsite.deliver_alert"


@app.task(name=TASK_NAME, pass_context=True)
async def deliver_alert(context: JobContext, *, delivery_id: int) -> str:
    status, wait = await attempt_next(delivery_id)
    if wait is not None:
        await _next(context.app, wait).defer_async(delivery_id=delivery_id)
    return status


def _next(on: App, wait: float) -> JobDeferrer:
    return on.configure_task(
        TASK_NAME,
        queue=settings.EVALSITE_QUEUE,
        # Never before it is due (a job early finds it held, and defers again).
        schedule_in={"seconds": max(math.ceil(wait), 0)},
    )


def defer_delivery(delivery_id: int) -> int:
    configured = app.configure_task(TASK_NAME, queue=settings.EVALSITE_QUEUE)
    return configured.defer(delivery_id=delivery_id)

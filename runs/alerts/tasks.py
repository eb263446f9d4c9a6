"""The distributed mode's delivery job: one procrastinate job per delivery."""

from __future__ import annotations

from django.conf import settings
from procrastinate.contrib.django import app

from runs.alerts.delivery import deliver

TASK_NAME = "evalsite.deliver_alert"


@app.task(name=TASK_NAME)
async def deliver_alert(*, delivery_id: int) -> str:
    # Its attempts and back-off are the delivery's own (``deliver``); a job
    # retried after a worker died goes on from the attempts logged.
    return await deliver(delivery_id)


def defer_delivery(delivery_id: int) -> int:
    configured = app.configure_task(TASK_NAME, queue=settings.EVALSITE_QUEUE)
    return configured.defer(delivery_id=delivery_id)

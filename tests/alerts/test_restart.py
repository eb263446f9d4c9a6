"""A delivery waiting out a back-off outlives the process that made it: the
next one to start sends it, once, however many start together."""

from __future__ import annotations

import asyncio

import pytest
from django.utils import timezone

from runs.alerts import services
from runs.alerts.delivery import HELD, attempt_next
from runs.alerts.dispatch import Sender, sender
from runs.models import AlertDelivery
from tests.alerts.receivers import receiver, wait_for

live_db = pytest.mark.django_db(transaction=True)
Status = AlertDelivery.Status


def delivery_of(pk: int) -> AlertDelivery:
    return AlertDelivery.objects.get(pk=pk)


@live_db
def test_a_delivery_backing_off_is_sent_once_after_a_restart(project, bob):
    # The receiver is down the first time and asks for a minute's wait.
    with receiver(statuses=[503], retry_after="60") as hook:
        channel = services.channel_create(
            project=project, user=bob, name="ci hook", kind="webhook", url=hook.url
        ).channel
        pk = services.channel_test(channel=channel, user=bob).pk
        wait_for(lambda: delivery_of(pk).status == Status.RETRYING, "attempt 1 failed")
        sender.stop()  # the process stops while the back-off is pending
        waiting = delivery_of(pk)
        assert [a["status_code"] for a in waiting.attempts] == [503]
        assert waiting.due_at is not None and waiting.due_at > timezone.now()

        # The minute passes while nothing runs; then two processes start.
        AlertDelivery.objects.filter(pk=pk).update(due_at=timezone.now())
        restarted = [Sender(), Sender()]
        try:
            for process in restarted:
                process.wake()
            wait_for(lambda: delivery_of(pk).is_final, "the delivery ended")
            wait_for(
                lambda: all(p.busy == 0 for p in restarted), "the senders are idle"
            )
        finally:
            for process in restarted:
                process.stop()
    delivered = delivery_of(pk)
    assert delivered.status == Status.DELIVERED and delivered.due_at is None
    assert [a["status_code"] for a in delivered.attempts] == [503, 200]
    assert len(hook.requests) == 2  # the alert itself reached it exactly once
    assert hook.requests[0].body == hook.requests[1].body


@live_db
def test_a_server_start_sends_the_deliveries_left_due(project, bob):
    with receiver() as hook:
        channel = services.channel_create(
            project=project, user=bob, name="ci hook", kind="webhook", url=hook.url
        ).channel
        # Made by a process that stopped before it sent anything.
        left = AlertDelivery.objects.create(channel=channel, test=True, payload={})
        restarted = Sender()
        try:
            restarted.wake()
            wait_for(lambda: delivery_of(left.pk).is_final, "the delivery ended")
        finally:
            restarted.stop()
    assert delivery_of(left.pk).status == Status.DELIVERED
    assert len(hook.requests) == 1


@live_db
def test_an_attempt_is_made_by_one_sender_alone(project, bob):
    with receiver(held=True) as hook:
        channel = services.channel_create(
            project=project, user=bob, name="ci hook", kind="webhook", url=hook.url
        ).channel
        pk = AlertDelivery.objects.create(channel=channel, test=True, payload={}).pk

        async def two_at_once() -> tuple[tuple[str, float | None], ...]:
            first = asyncio.create_task(attempt_next(pk))
            assert await asyncio.to_thread(hook.arrived.wait, 30)
            second = await attempt_next(pk)  # while the first is in flight
            hook.gate.set()
            return await first, second

        made, other = asyncio.run(two_at_once())
    assert made == (Status.DELIVERED, None)
    assert other[0] == HELD and other[1] is not None and other[1] > 0
    assert len(hook.requests) == 1
    assert len(delivery_of(pk).attempts) == 1

"""The embedded scheduler ticks when it starts: missed ticks make one run."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.utils import timezone

from runs.evaluations.scheduler import (
    schedules_start,
    schedules_stop,
    seconds_to_next_minute,
)
from runs.evaluations.schedules import schedule_add
from runs.models import Evaluation, Run, ScheduleTick
from tests.evaluations.conftest import T0

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A server's loop, in a thread of its own."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    schedules_stop(loop)
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    connections.close_all()


def test_a_server_starting_after_missed_ticks_makes_one_catch_up_run(
    loop: asyncio.AbstractEventLoop, evaluation: Evaluation, bob: User
) -> None:
    stopped_at = timezone.now() - timedelta(minutes=3, seconds=30)
    schedule_add(evaluation=evaluation, user=bob, cron="* * * * *", now=stopped_at)
    schedules_start(loop)
    deadline = time.monotonic() + 30
    while not ScheduleTick.objects.exists():
        assert time.monotonic() < deadline, "no tick taken"
        time.sleep(0.05)
    [tick] = ScheduleTick.objects.all()
    assert tick.outcome == ScheduleTick.Outcome.CAUGHT_UP
    assert tick.missed >= 2
    assert Run.objects.filter(evaluation=evaluation).count() == 1


@pytest.mark.parametrize(("seconds", "wait"), [(0, 61.0), (59.5, 1.5), (30, 31.0)])
def test_the_scheduler_wakes_after_each_minute_turns(
    seconds: float, wait: float
) -> None:
    now = T0 + timedelta(seconds=seconds)
    assert seconds_to_next_minute(now) == pytest.approx(wait)

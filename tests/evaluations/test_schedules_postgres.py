"""Schedules on PostgreSQL: two processes at one tick, one wins; the workers'
periodic job."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections

from runs.evaluations.schedules import schedule_add, schedule_tick
from runs.models import Evaluation, Run, Schedule, ScheduleTick
from tests.evaluations.conftest import T0, at

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql_only(db: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): run in the PostgreSQL pass")


def tick_in_thread(
    schedule_id: int, now: datetime, barrier: threading.Barrier, out: list[Any]
) -> None:
    try:
        schedule = Schedule.objects.get(pk=schedule_id)
        barrier.wait(timeout=30)
        out.append(schedule_tick(schedule, now=now))
    except Exception as exc:  # reported to the test, which fails on it
        out.append(exc)
    finally:
        connections.close_all()


def test_two_processes_at_one_tick_start_it_once(
    evaluation: Evaluation, bob: User
) -> None:
    schedule = schedule_add(evaluation=evaluation, user=bob, cron="* * * * *", now=T0)
    for minute in (1, 2, 3):
        barrier = threading.Barrier(2)
        out: list[Any] = []
        threads = [
            threading.Thread(
                target=tick_in_thread, args=(schedule.pk, at(minute), barrier, out)
            )
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not [o for o in out if isinstance(o, Exception)], out
        taken = [o for o in out if o is not None]
        assert len(taken) == 1, out  # one of the two won the tick
        Run.objects.filter(evaluation=evaluation).update(status="completed")
    ticks = ScheduleTick.objects.filter(schedule=schedule).order_by("tick_at")
    assert [t.tick_at for t in ticks] == [at(1), at(2), at(3)]
    assert Run.objects.filter(evaluation=evaluation).count() == 3


def test_the_workers_run_the_schedules_as_a_periodic_job(
    evaluation: Evaluation, bob: User
) -> None:
    # Only here: procrastinate's Django app is installed on PostgreSQL alone.
    from procrastinate.contrib.django import app

    from runs.evaluations import periodic

    registered = {
        (task.task.name, task.cron)
        for task in app.periodic_registry.periodic_tasks.values()
    }
    assert (periodic.TASK_NAME, "* * * * *") in registered
    schedule_add(evaluation=evaluation, user=bob, cron="* * * * *", now=T0)
    taken = asyncio.run(periodic.evaluation_schedules.func(int(at(1).timestamp())))
    assert taken == 1
    assert Run.objects.filter(evaluation=evaluation).count() == 1

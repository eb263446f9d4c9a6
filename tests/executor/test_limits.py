"""Pacing: the request-rate limit, adaptive concurrency and coalesced progress."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from runs.calls import limits
from runs.calls.limits import AdaptiveConcurrency, RateLimiter, RetryBudget
from runs.events import run_group
from runs.executor.engine import Execution, execute_run
from runs.models import Run, RunStatus
from runs.testing.fake_faults import FaultMix
from tests.factories import arithmetic_items


class FakeClock:
    """Monotonic time that only moves when the limiter sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def test_rate_limiter_allows_rpm_calls_a_minute(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(limits.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(limits.asyncio, "sleep", clock.sleep)
    limiter = RateLimiter(rpm=60)
    for _ in range(31):
        await limiter.acquire()
    # One call at once (a second's burst), then one a second.
    assert clock.now - 1000.0 == pytest.approx(30.0)


async def test_a_burst_of_429s_halves_concurrency_and_successes_restore_it():
    limiter = AdaptiveConcurrency(16)
    for _ in range(3):
        limiter.throttled()
    assert (limiter.limit, limiter.backing_off) == (8, True)
    for _ in range(8 + 9 + 10 + 11 + 12 + 13 + 14 + 15):
        limiter.succeeded()
    assert (limiter.limit, limiter.backing_off) == (16, False)


async def test_a_lone_429_does_not_halve_concurrency():
    limiter = AdaptiveConcurrency(16)
    limiter.throttled()
    limiter.throttled()
    assert limiter.limit == 16


async def test_concurrency_never_drops_below_one():
    limiter = AdaptiveConcurrency(2)
    for _ in range(3):
        limiter.throttled()
    limiter.last_decrease -= 10
    for _ in range(3):
        limiter.throttled()
    assert limiter.limit == 1


async def test_without_adaptation_429s_change_nothing():
    limiter = AdaptiveConcurrency(4, adaptive=False)
    for _ in range(10):
        limiter.throttled()
    assert limiter.limit == 4


async def test_slots_hold_in_flight_calls_to_the_limit():
    limiter = AdaptiveConcurrency(2)
    peak = 0

    async def call() -> None:
        nonlocal peak
        async with limiter.slot():
            peak = max(peak, limiter.active)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(call() for _ in range(10)))
    assert (peak, limiter.active) == (2, 0)


async def test_a_place_given_back_wakes_one_waiting_call_not_all():
    # A lowered limit with calls waiting: a condition's notify_all woke every
    # waiting call for each place given back (20 + 19 + ... task steps), and
    # all but one waited again.
    limiter = AdaptiveConcurrency(1)
    calls = 20
    order: list[int] = []
    resumed = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal resumed
        if event == "call" and frame.f_code.co_name == "take":
            resumed += 1

    async def call(n: int) -> None:
        async with limiter.slot():
            order.append(n)
            await asyncio.sleep(0)

    sys.setprofile(count)
    try:
        await asyncio.gather(*(call(n) for n in range(calls)))
    finally:
        sys.setprofile(None)
    assert order == list(range(calls))  # first come, first served
    assert (limiter.active, limiter.waiting, limiter.woken) == (0, 0, 0)
    # Each waiting call: its start, and one wake-up.
    assert resumed <= 2 * calls


async def test_a_woken_call_cancelled_before_it_runs_passes_its_place_on():
    limiter = AdaptiveConcurrency(1)
    await limiter.take()
    first = asyncio.create_task(limiter.take())
    second = asyncio.create_task(limiter.take())
    await asyncio.sleep(0)  # both wait
    await limiter.give_back()  # wakes the first ...
    first.cancel()  # ... cancelled before it takes the place
    await asyncio.wait_for(second, 30)
    with pytest.raises(asyncio.CancelledError):
        await first
    assert (limiter.active, limiter.waiting, limiter.woken) == (1, 0, 0)


async def test_a_waiting_call_cancelled_leaves_the_line():
    limiter = AdaptiveConcurrency(1)
    await limiter.take()
    waiting = asyncio.create_task(limiter.take())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await limiter.give_back()
    assert (limiter.active, limiter.waiting, len(limiter.waiters)) == (0, 0, 0)


async def test_a_raised_limit_lets_as_many_waiting_calls_go_as_it_has_places():
    limiter = AdaptiveConcurrency(4)
    limiter.set_limit(1)
    await limiter.take()
    waiting = [asyncio.create_task(limiter.take()) for _ in range(3)]
    await asyncio.sleep(0)
    limiter.set_limit(4)  # three more places: given as a place comes back
    await limiter.give_back()
    await asyncio.wait_for(asyncio.gather(*waiting), 30)
    assert limiter.active == 3


def test_retry_budget_is_spent_once_per_retry():
    budget = RetryBudget(2)
    assert [budget.spend() for _ in range(3)] == [True, True, False]
    assert RetryBudget(None).spend()


@pytest.mark.django_db(transaction=True)
async def test_a_run_backs_off_under_429s_and_shows_it(make_run, fake_openai):
    fake_openai.faults = FaultMix(error_429=0.6, retry_after="0")
    # Answers that take a moment, as a real endpoint's do: a back-off then
    # lasts longer than the executor's report interval, however fast the host.
    fake_openai.latency_ms = 20
    run = await sync_to_async(make_run)(
        arithmetic_items(120), concurrency=16, max_attempts=20
    )
    executions: list[Execution] = []
    task = asyncio.create_task(execute_run(run.pk, on_start=executions.append))
    lowest, shown = 16, False
    while not task.done():
        await asyncio.sleep(0.02)
        if executions and executions[0].runner:
            lowest = min(lowest, executions[0].runner.concurrency.limit)
        shown = shown or (await Run.objects.aget(pk=run.pk)).backing_off
    assert await task == RunStatus.COMPLETED
    await run.arefresh_from_db()
    assert lowest < 16 and shown
    assert run.throttle_limit is None  # cleared when the run ends


@pytest.mark.django_db(transaction=True)
async def test_progress_events_are_coalesced_not_one_per_item(make_run):
    run = await sync_to_async(make_run)(arithmetic_items(400), concurrency=32)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(run_group(run.pk), channel)
    await execute_run(run.pk)
    events = []
    while True:
        try:
            async with asyncio.timeout(0.2):
                events.append(await layer.receive(channel))
        except TimeoutError:
            break
    assert events and events[-1]["final"] is True
    assert len(events) < 40  # 400 items, announced in a few stored batches

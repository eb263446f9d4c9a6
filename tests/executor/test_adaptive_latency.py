"""Adaptive concurrency fitted to an endpoint's latency and timeouts.

The controller is driven with a fake clock, and by a simulated endpoint that
answers one request at a time: no test here waits on real time.
"""

from __future__ import annotations

import heapq
import statistics

from runs.calls.limits import AdaptiveConcurrency


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def one_at_a_time(
    controller: AdaptiveConcurrency, clock: Clock, *, calls: int, service: float
) -> list[float]:
    """Latencies of ``calls`` calls to an endpoint that serves one at a time,
    each taking ``service`` seconds, with as many in flight as the
    controller allows (the executor's workers always have one ready)."""
    free_at = clock.now  # when the endpoint is done with the calls it holds
    latencies: list[float] = []
    in_flight: list[tuple[float, float]] = []  # (finish, start)

    def fill() -> None:
        nonlocal free_at
        while len(in_flight) < controller.limit:
            start = clock.now
            free_at = max(free_at, start) + service
            heapq.heappush(in_flight, (free_at, start))

    fill()
    while len(latencies) < calls:
        finish, start = heapq.heappop(in_flight)
        clock.now = finish
        latencies.append(finish - start)
        controller.succeeded(finish - start, started=start)
        fill()
    return latencies


def test_latency_that_grows_with_calls_in_flight_lowers_the_concurrency() -> None:
    clock = Clock()
    controller = AdaptiveConcurrency(8, clock=clock)

    latencies = one_at_a_time(controller, clock, calls=200, service=1.0)

    # Eight at once wait for seven others: eight seconds each. Fitted, a
    # call waits for at most one other.
    assert controller.limit <= 2
    assert statistics.median(latencies[-100:]) <= 2.0
    assert controller.backing_off


def test_concurrency_grows_back_when_latency_recovers() -> None:
    clock = Clock()
    controller = AdaptiveConcurrency(8, clock=clock)
    one_at_a_time(controller, clock, calls=100, service=1.0)
    assert controller.limit <= 2

    # The endpoint now answers every call at once in a second.
    for _ in range(200):
        clock.now += 1.0
        controller.succeeded(1.0, started=clock.now - 1.0)

    assert (controller.limit, controller.backing_off) == (8, False)


def test_latency_never_takes_the_concurrency_below_one() -> None:
    clock = Clock()
    controller = AdaptiveConcurrency(4, clock=clock)
    controller.succeeded(0.5, started=clock.now)
    limits = []
    slower = 1.0
    for _ in range(50):
        clock.now += slower
        controller.succeeded(slower, started=clock.now - slower)
        limits.append(controller.limit)
        slower *= 1.5

    assert min(limits) == 1


def test_calls_begun_under_a_higher_limit_judge_nothing() -> None:
    clock = Clock()
    controller = AdaptiveConcurrency(8, clock=clock)
    controller.succeeded(1.0, started=clock.now)
    began = clock.now
    clock.now += 1.0
    controller.timed_out(started=began)
    assert controller.limit == 4

    # The others that were queued with it time out or answer slowly: they
    # were sent under the old limit and lower nothing more.
    for _ in range(8):
        controller.timed_out(started=began)
        controller.succeeded(8.0, started=began)
    assert controller.limit == 4


def test_timeouts_halve_the_concurrency_down_to_one() -> None:
    clock = Clock()
    controller = AdaptiveConcurrency(8, clock=clock)
    for _ in range(5):
        clock.now += 1.0
        controller.timed_out(started=clock.now)
        clock.now += 1.0

    assert controller.limit == 1


def test_an_endpoint_that_answers_in_a_millisecond_is_never_held_back() -> None:
    # Sub-millisecond calls vary with this process's own event loop; such
    # differences are no queue at the endpoint.
    clock = Clock()
    controller = AdaptiveConcurrency(64, clock=clock)
    for number in range(5000):
        latency = 0.0002 if number % 7 else 0.02
        clock.now += 0.0001
        controller.succeeded(latency, started=clock.now - latency)

    assert controller.limit == 64


def test_without_adaptation_latency_and_timeouts_change_nothing() -> None:
    clock = Clock()
    controller = AdaptiveConcurrency(8, adaptive=False, clock=clock)
    one_at_a_time(controller, clock, calls=50, service=1.0)
    controller.timed_out(started=clock.now)

    assert controller.limit == 8

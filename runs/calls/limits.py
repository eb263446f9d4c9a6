"""What paces a run's calls: a request rate, adaptive concurrency, a retry budget.

All three live on one event loop and change state only between awaits, so
they need no locks beyond asyncio's own. ``shared_limits.py`` makes the rate
and the back-off hold per target across processes, and the retry budget per
run; the bucket's maths (``reservation``) is here, one for every store.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from runs.pools.shares import InContext

THROTTLE_BURST = 3  # this many 429s ...
THROTTLE_WINDOW = 10.0  # ... within this many seconds halve the concurrency
THROTTLE_COOLDOWN = 1.0  # at most one halving per this many seconds
# A round's fastest call this many times the fastest seen is queueing ...
LATENCY_TOLERANCE = 2.0
# ... at most this many times, room for one more call.
LATENCY_RECOVERED = 1.5
MIN_GRADIENT = 0.5  # one round lowers the limit by at most half
# A rise in latency smaller than this is no queue worth lowering for: an
# endpoint that answers in a millisecond sees more than that from this
# process's own event loop under load.
LATENCY_SLACK = 0.05


class RateLimiter:
    """A token bucket: at most ``rpm`` calls a minute, bursts of a second's worth."""

    def __init__(self, rpm: float) -> None:
        self.rate = rpm / 60.0
        self.capacity = max(1.0, self.rate)
        self.tokens = self.capacity
        self.updated = time.monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self.lock:
            while True:
                now = time.monotonic()
                self.tokens = min(
                    self.capacity, self.tokens + (now - self.updated) * self.rate
                )
                self.updated = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                await asyncio.sleep((1 - self.tokens) / self.rate)


class Slot(AbstractAsyncContextManager[None]):
    """``AdaptiveConcurrency.slot``: a plain class, not an
    ``asynccontextmanager``, whose generator and wrapper cost more than the
    bookkeeping (every call of a run takes one)."""

    __slots__ = ("limits",)

    def __init__(self, limits: AdaptiveConcurrency) -> None:
        self.limits = limits

    async def __aenter__(self) -> None:
        limits = self.limits
        if limits.active < limits.limit:  # the usual case, without a wait
            limits.active += 1
        else:
            await limits.take()

    async def __aexit__(self, *exc: object) -> None:
        limits = self.limits
        if limits.waiting:
            await limits.give_back()
        else:
            limits.active -= 1


class AdaptiveConcurrency:
    """The calls in flight, fitted to what the endpoint answers.

    Three signals lower the limit, never below 1, and one raises it, never
    above the run's concurrency:

    - a burst of 429s halves it (``THROTTLE_BURST`` within ``THROTTLE_WINDOW``,
      at most once per ``THROTTLE_COOLDOWN``);
    - a timeout halves it: a call that queued at the endpoint until its
      timeout is retried, and the retry only adds to the queue;
    - latency that rises above what the endpoint takes unloaded lowers it by
      the ratio of the two (the gradient of Netflix's concurrency-limits, the
      queueing signal of TCP Vegas): an endpoint that answers fewer calls at
      once than it is sent queues the others, and each waits for those ahead;
    - latency near the unloaded one raises it by one per round.

    Latency is judged once per round, ``limit`` calls that began after the
    limit last changed (calls from before were queued under the old limit
    and say nothing of the new one), as Vegas judges once per round trip. A
    round's fastest call is compared with the fastest call seen (the
    endpoint's own latency, as no queue of ours delays the fastest): the
    fastest of a round, not its mean, as a model's latency also grows with
    its answer's length, which a mix of items varies but queueing never
    lowers. More than ``LATENCY_TOLERANCE`` times the fastest seen is
    queueing: the limit becomes ``limit * max(0.5, tolerance / ratio)``; at
    most ``LATENCY_RECOVERED`` times, or less than ``LATENCY_SLACK`` seconds
    more, is room: one more call. Between the two the limit holds. At a
    limit of 1 no queue is ours: a slower round there is the endpoint's own
    pace, and becomes the fastest seen.
    """

    def __init__(
        self,
        maximum: int,
        *,
        adaptive: bool = True,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.adaptive = adaptive
        self.clock = clock or time.monotonic
        self.active = 0
        self.waiting = 0
        self.throttles: deque[float] = deque()
        self.last_decrease = float("-inf")
        self.changed_at = float("-inf")  # calls begun before judge nothing
        self.fastest: float | None = None  # the endpoint's unloaded latency
        self.round_calls = 0
        self.round_fastest = math.inf
        self.latency: float | None = None  # recent calls' latency (smoothed)
        # Calls waiting for a place, first come first woken (``take``).
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.woken = 0  # woken, and yet to take their place

    @property
    def backing_off(self) -> bool:
        return self.limit < self.maximum

    def slot(self) -> AbstractAsyncContextManager[None]:
        """A call's place among those in flight, held for the ``async with``."""
        return Slot(self)

    async def take(self) -> None:
        if self.active >= self.limit:  # else take it at once: one loop, no race
            self.waiting += 1
            try:
                while self.active >= self.limit:
                    await self.wait_turn()
            finally:
                self.waiting -= 1
        self.active += 1

    async def wait_turn(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                # Woken, then cancelled before it took its place: the next
                # waiting call takes it.
                self.woken -= 1
                self.wake()
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self.waiters.remove(waiter)
            raise
        self.woken -= 1

    def wake(self) -> None:
        """Wake as many waiting calls as there are free places, first come
        first. (A condition's ``notify_all`` woke every waiting call for each
        place given back, and all but one waited again: with a lowered limit,
        a dozen task steps and futures a call.)"""
        free = self.limit - self.active - self.woken
        while free > 0 and self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self.woken += 1
                free -= 1

    async def give_back(self) -> None:
        self.active -= 1
        if self.waiting:
            self.wake()

    def throttled(self) -> None:
        if self.burst():
            self.decrease()

    def burst(self) -> bool:
        """Count a 429; True when it completes a burst that calls for a halving."""
        if not self.adaptive:
            return False
        now = self.clock()
        self.new_round()
        self.throttles.append(now)
        while self.throttles and now - self.throttles[0] > THROTTLE_WINDOW:
            self.throttles.popleft()
        burst = len(self.throttles) >= THROTTLE_BURST
        if burst and now - self.last_decrease >= THROTTLE_COOLDOWN:
            self.last_decrease = now
            self.throttles.clear()
            return True
        return False

    def decrease(self, times: int = 1) -> None:
        limit = self.limit
        for _ in range(times):
            limit = max(1, limit // 2)
        self.set_limit(limit)

    def timed_out(self, *, started: float | None = None) -> None:
        """A call that timed out: halve, unless it began under a higher limit."""
        if not self.adaptive or self.before_change(started):
            return
        self.last_decrease = self.clock()
        self.decrease()

    def succeeded(
        self, latency: float | None = None, *, started: float | None = None
    ) -> None:
        """A call answered in ``latency`` seconds, begun at ``started`` (clock)."""
        if not self.adaptive:
            return
        if latency is not None:
            self.latency = (
                latency if self.latency is None else 0.8 * self.latency + 0.2 * latency
            )
        if self.before_change(started):
            return
        if latency is not None:
            fastest = self.fastest
            self.fastest = latency if fastest is None else min(fastest, latency)
            self.round_fastest = min(self.round_fastest, latency)
        self.round_calls += 1
        if self.round_calls >= self.limit:
            self.judge_round()

    def before_change(self, started: float | None) -> bool:
        return started is not None and started < self.changed_at

    def judge_round(self) -> None:
        fastest, ratio, queued = self.round_fastest, 1.0, 0.0
        if self.fastest and math.isfinite(fastest):
            ratio, queued = fastest / self.fastest, fastest - self.fastest
        if queued <= LATENCY_SLACK:
            ratio = min(ratio, LATENCY_RECOVERED)
        if ratio > LATENCY_TOLERANCE:
            if self.limit == 1:
                self.fastest = fastest  # the endpoint's own pace has slowed
                self.new_round()
            else:
                gradient = max(MIN_GRADIENT, LATENCY_TOLERANCE / ratio)
                self.set_limit(max(1, int(self.limit * gradient)))
        elif ratio <= LATENCY_RECOVERED and self.limit < self.maximum:
            self.set_limit(self.limit + 1)
        else:
            self.new_round()

    def set_limit(self, limit: int) -> None:
        self.limit = min(max(1, limit), self.maximum)
        self.changed_at = self.clock()
        self.new_round()

    def new_round(self) -> None:
        self.round_calls = 0
        self.round_fastest = math.inf


class RetryBudget:
    """How many retries the whole run may still make (None: no limit)."""

    def __init__(self, total: int | None) -> None:
        self.left = total

    def spend(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    async def take(self) -> bool:
        """``spend`` as the item runner calls it (a shared budget must await)."""
        return self.spend()


@dataclass(frozen=True, slots=True)
class Reserved:
    tat: float | None
    wait: float  # seconds: until the call may go, or until it may ask again
    reserved: bool


def reservation(tat: float, now: float, interval: float, window: float) -> Reserved:
    """The bucket's maths, for every store.

    A call may go once the bucket's time is no more than ``window`` ahead of
    now. It takes its place (moves the time on by its interval) only when
    that place is at most one more window away: the queue of places taken is
    bounded, so callers that are cancelled or killed while they wait waste at
    most two windows of the target's calls; the others ask again later.
    """
    tat = max(tat, now)
    wait = tat + interval - now - window
    if wait > window:
        return Reserved(None, wait - window, reserved=False)
    return Reserved(tat + interval, wait, reserved=True)


class CallRate(Protocol):
    """A request rate: waits until one more call may go."""

    async def acquire(self) -> None: ...


_call_rate: contextvars.ContextVar[CallRate | None] = contextvars.ContextVar(
    "evalsite_call_rate", default=None
)


def use_call_rate(rate: CallRate | None) -> AbstractContextManager[None]:
    """Make ``rate`` (a run's request rate) the one ``call_rate`` gives, in
    this context and its tasks: a target that makes several calls for one
    item (an agent's loop) paces each by it."""
    return InContext(_call_rate, rate)


def call_rate() -> CallRate | None:
    """The run's request rate, inside a run that has one."""
    return _call_rate.get()


_attempt_timeout: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "evalsite_attempt_timeout", default=None
)


def use_attempt_timeout(seconds: float | None) -> AbstractContextManager[None]:
    """Make ``seconds`` (a run's per-attempt timeout) the one
    ``attempt_timeout`` gives: a target that keeps a trajectory ends it
    itself a little before, so that its steps are kept."""
    return InContext(_attempt_timeout, seconds)


def attempt_timeout() -> float | None:
    """The run's per-attempt timeout, inside a run."""
    return _attempt_timeout.get()

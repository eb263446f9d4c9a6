"""What paces a run's calls: a request rate, adaptive concurrency, a retry budget.

All three live on one event loop and change state only between awaits, so
they need no locks beyond asyncio's own. ``shared_limits.py`` makes the rate
and the back-off hold per target across processes, and the retry budget per
run; the bucket's maths (``reservation``) is here, one for every store.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

THROTTLE_BURST = 3  # this many 429s ...
THROTTLE_WINDOW = 10.0  # ... within this many seconds halve the concurrency
THROTTLE_COOLDOWN = 1.0  # at most one halving per this many seconds


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


class AdaptiveConcurrency:
    """Additive increase, multiplicative decrease of the calls in flight.

    A burst of 429s halves the limit; every ``limit`` successes in a row raise
    it by one, back up to the run's concurrency.
    """

    def __init__(self, maximum: int, *, adaptive: bool = True) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.adaptive = adaptive
        self.active = 0
        self.waiting = 0
        self.successes = 0
        self.throttles: deque[float] = deque()
        self.last_decrease = 0.0
        self.changed = asyncio.Condition()

    @property
    def backing_off(self) -> bool:
        return self.limit < self.maximum

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.active >= self.limit:  # else take it at once: one loop, no race
            self.waiting += 1
            try:
                async with self.changed:
                    await self.changed.wait_for(lambda: self.active < self.limit)
            finally:
                self.waiting -= 1
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            if self.waiting:
                async with self.changed:
                    self.changed.notify_all()

    def throttled(self) -> None:
        if self.burst():
            self.decrease()

    def burst(self) -> bool:
        """Count a 429; True when it completes a burst that calls for a halving."""
        if not self.adaptive:
            return False
        now = time.monotonic()
        self.successes = 0
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
        for _ in range(times):
            self.limit = max(1, self.limit // 2)

    def succeeded(self) -> None:
        if self.limit >= self.maximum:
            return
        self.successes += 1
        if self.successes >= self.limit:
            self.limit += 1
            self.successes = 0


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

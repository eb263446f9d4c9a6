"""A run's concurrency over all its executors: the leases of ``concurrency``
places that each call of a shard holds (``shared_limits.LeasedConcurrency``).

The leases live in the shared store (Redis, else PostgreSQL, else this
process) with the executors that hold them (their holders). A lease expires
``EVALSITE_STALL_SECONDS`` after it was taken or last renewed, and so does a
holder: the leases and the place among the holders of an executor that is
killed come back within that time.

What one store round trip costs is paid rarely, not once or twice per call:

- a call that ends hands its lease to a call of the same executor that waits
  for one, without the store, as long as the executor holds no more than its
  share of the run's places (the places over the live holders, rounded up);
- the callers that wait are served together: one request to the store asks
  for as many leases as there are callers waiting (up to the executor's
  share, then whatever else is free, less eagerly);
- leases given back are returned to the store together, in the background.

An executor above its share (another joined since it took its leases) gives
leases back as its calls end, so that a newcomer's requests find them; each
executor learns how many hold the run's leases from every answer of the
store, and from the renewal of its place at each watch tick.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from typing import Any, Protocol


class LeaseStore(Protocol):
    """The shared store's calls, as ``shared_limits.Degrading`` makes them."""

    async def call(self, method: str, *args: Any) -> Any: ...


# How long calls sent to the store in the background are waited for at the end.
ANNOUNCE_GRACE = 2.0


async def settle(pending: set[asyncio.Task[Any]]) -> None:
    """Let calls sent to the store in the background arrive, for a while."""
    if pending:
        await asyncio.wait(set(pending), timeout=ANNOUNCE_GRACE)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


class RunLeases:
    """At most ``size`` calls of one run in flight, over all its executors."""

    POLL_FIRST = 0.01  # seconds: how soon the waiting callers ask again ...
    POLL_MAX = 0.2  # ... at most, doubling while the run's places are all held

    def __init__(self, store: LeaseStore, key: str, size: int, ttl: float) -> None:
        self.store = store
        self.key = key
        self.size = size
        self.ttl = ttl
        self.holder = uuid.uuid4().hex  # this executor, among the run's holders
        self.holders = 1  # the run's live holders, as the store last said
        self.held: set[str] = set()
        self.renewed = time.monotonic()
        # Callers waiting for a lease, served in order; one task asks the
        # store for all of them at once.
        self.waiting: list[asyncio.Future[str]] = []
        self.asking: asyncio.Task[None] | None = None
        self.asked: list[str] = []  # the leases of the request in flight
        self.returning: list[str] = []  # given back, not yet sent to the store
        self.pending: set[asyncio.Task[Any]] = set()
        self.requests = 0  # calls to the store, for the tests' counts

    @property
    def share(self) -> int:
        """This executor's share of the run's places."""
        return max(1, math.ceil(self.size / max(self.holders, 1)))

    async def take(self) -> str:
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiting.append(waiter)
        if self.asking is None or self.asking.done():
            self.asking = asyncio.ensure_future(self.ask())
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter in self.waiting:
                self.waiting.remove(waiter)
            elif not waiter.cancelled() and waiter.exception() is None:
                self.give_back(waiter.result())  # handed over as it was cancelled
            raise

    async def ask(self) -> None:
        """Ask the store for leases while callers wait for them."""
        wait = self.POLL_FIRST
        while self.waiting:
            room = self.share - len(self.held)
            # Up to this executor's share at once; beyond it (free places that
            # others leave unused) less eagerly, as the poll's longest wait.
            want = min(len(self.waiting), room if room > 0 else self.share)
            leases = self.asked = [uuid.uuid4().hex for _ in range(want)]
            self.requests += 1
            granted, self.holders = await self.store.call(
                "lease_take", self.key, self.holder, leases, self.size, self.ttl
            )
            self.asked = []
            for lease in leases[:granted]:
                self.held.add(lease)
                self.hand_over(lease)
            if granted:
                wait = self.POLL_FIRST
                continue
            await asyncio.sleep(wait if room > 0 else self.POLL_MAX)
            wait = min(wait * 2, self.POLL_MAX)

    def hand_over(self, lease: str) -> None:
        """Give a held lease to the first caller waiting, else back."""
        while self.waiting:
            waiter = self.waiting.pop(0)
            if not waiter.done():
                waiter.set_result(lease)
                return
        self.give_back(lease, keep=False)

    def give_back(self, lease: str, *, keep: bool = True) -> None:
        """Without waiting for the store: a call that ends (or is cancelled)
        must not wait on it; a lease not given back expires.

        Kept for a caller of this executor that waits, while the executor
        holds no more than its share; else returned to the store.
        """
        if lease not in self.held:
            return
        if keep and self.waiting and len(self.held) <= self.share:
            self.hand_over(lease)
            return
        self.held.discard(lease)
        self.returning.append(lease)
        if len(self.returning) == 1:
            self.later(self.send_back())

    async def send_back(self) -> None:
        await asyncio.sleep(0)  # the other calls ending at this moment too
        while self.returning:
            leases, self.returning = self.returning, []
            self.requests += 1
            await self.store.call("lease_drop", self.key, leases)

    def later(self, call: Any) -> None:
        task = asyncio.ensure_future(call)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def renew(self) -> None:
        """Keep this executor's place among the holders (and learn their
        number); renew the leases held a few times per their lifetime."""
        leases: list[str] = []
        if time.monotonic() - self.renewed >= self.ttl / 3:
            self.renewed = time.monotonic()
            leases = sorted(self.held)
        self.requests += 1
        self.holders, lost = await self.store.call(
            "lease_renew", self.key, self.holder, leases, self.ttl
        )
        # Expired (this process stalled past their lifetime): others may hold
        # those places now, so the calls that hold them pass them to no one.
        self.held.difference_update(lost)

    async def aclose(self) -> None:
        """Leave the run's holders, with any lease still held."""
        if self.asking is not None:
            self.asking.cancel()
            await asyncio.gather(self.asking, return_exceptions=True)
        await settle(self.pending)  # leases given back as the shard ends
        # With those of a request cut short, which the store may have granted.
        leases = sorted(self.held.union(self.asked))
        self.held, self.asked = set(), []
        self.requests += 1
        await self.store.call("lease_leave", self.key, self.holder, leases)

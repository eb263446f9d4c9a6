"""Limits that hold across processes: a target's rate and back-off, a run's
retries and calls in flight.

A target's requests-per-minute limit and the back-off after a burst of 429s
protect the target, so they are kept per target for every worker and every
run that calls it, not per process:

- in Redis when ``REDIS_URL`` is set (one Lua script per call: atomic, and
  timed by Redis's own clock, so machines' clocks need not agree);
- in PostgreSQL when there is no Redis (``RateBucket``, one ``INSERT ... ON
  CONFLICT`` per call, timed by the database's clock);
- in this process otherwise (the embedded mode: one process, shared by its
  runs).

A shared store that fails (Redis unreachable, the database restarting) never
fails a run: the call is paced by this process's own state instead, with a
warning, and the shared store is tried again a few seconds later.

The rate is a GCRA token bucket: the state is one time, the bucket's
"theoretical arrival time" (``tat``). A call moves it on by the calling run's
interval (60 / rpm seconds) and waits until it is no more than the burst
window (a second's worth of calls) ahead of now. Runs with different limits on
one target each take their own interval from the same time, so each call
costs its share of the target's minute. A call takes its place and sleeps
until it comes, so waiting callers do not poll the store; only places up to
one window beyond the burst are given out (``reservation``), so that callers
cancelled or killed while they wait hold back little of the target's rate.

The back-off is a shared level: the number of halvings of concurrency that
bursts of 429s announced, at most one per ``THROTTLE_COOLDOWN`` across all
workers, in force until ``BACKOFF_HOLD`` seconds pass without another burst.
Every execution reads it at start and with each watch tick and halves its own
concurrency once per new level; it climbs back additively by itself
(``AdaptiveConcurrency``), so the level only ever slows workers down.

A run's concurrency holds for the run, over all its shards and workers: each
call of a shard holds one of ``concurrency`` leases of the run in the same
store (``run_leases.py``: each executor holds about its share of them, hands a
lease from a call that ends to one that waits, and asks the store for many at
once). A lease expires ``EVALSITE_STALL_SECONDS`` after it was taken or last
renewed; its holder renews all its leases a few times in that period, so the
leases of a worker that is killed come back within it. Only the shards of a
distributed run take leases: a run executed whole in one process holds its
concurrency by itself.

The retry budget is a counter on the run (``Run.retries_used``), spent with a
conditional UPDATE: its shards draw from one budget. The cost budget was
already shared: every executor adds its results' cost to ``Run.cost``, which
the watch loop reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection

from runs.calls import limits_store
from runs.calls.limits import (
    THROTTLE_COOLDOWN,
    AdaptiveConcurrency,
    RetryBudget,
    reservation,
)
from runs.calls.limits_redis import (
    BACKOFF_RAISE_LUA,
    LEASE_LEAVE_LUA,
    LEASE_RENEW_LUA,
    LEASE_TAKE_LUA,
    RESERVE_LUA,
    redis_client,
)
from runs.executor.options import RunOptions
from runs.executor.run_leases import RunLeases, settle
from runs.records.installation import database_id

logger = logging.getLogger(__name__)

# A target that answered a burst of 429s this recently is still treated as
# busy, by workers that join later too.
BACKOFF_HOLD = 30.0
# How long a failed shared store is left alone before it is tried again.
RETRY_SHARED_AFTER = 5.0
REDIS_PREFIX = "evalsite:limits:"
MAX_LEVEL = limits_store.MAX_LEVEL
# The fields of a target's configuration that say which endpoint it calls.
ENDPOINT_FIELDS = ("base_url", "url", "model")


def run_key(run_id: int) -> str:
    """What a run's leases are kept under."""
    return f"run:{database_id()}:{run_id}"


def limit_key(spec_target_id: int | None, kind: str, config: dict[str, Any]) -> str:
    """What a target's shared limits are kept under.

    A saved target's id when the run was made from one: a saved target is
    what people name as one endpoint with one key (two targets on one host
    may hold keys with separate quotas), and its runs share its limits
    whatever their frozen copies say. Otherwise the endpoint's identity: the
    kind with its URL and model (the parts that decide which quota a call
    draws from), hashed; a configuration without those is hashed whole.
    """
    if spec_target_id is not None:
        return f"target:{database_id()}:{spec_target_id}"
    identity = {name: config[name] for name in ENDPOINT_FIELDS if name in config}
    text = json.dumps([kind, identity or config], sort_keys=True, default=str)
    return "endpoint:" + hashlib.sha256(text.encode()).hexdigest()[:40]


class Store(Protocol):
    name: str

    async def reserve(
        self, key: str, interval: float, window: float
    ) -> tuple[bool, float]: ...
    async def backoff_raise(self, key: str) -> int: ...
    async def backoff_level(self, key: str) -> int: ...
    async def lease_take(
        self, key: str, holder: str, leases: list[str], size: int, ttl: float
    ) -> tuple[int, int]: ...
    async def lease_renew(
        self, key: str, holder: str, leases: list[str], ttl: float
    ) -> tuple[int, list[str]]: ...
    async def lease_drop(self, key: str, leases: list[str]) -> None: ...
    async def lease_leave(self, key: str, holder: str, leases: list[str]) -> None: ...


@dataclass
class _Bucket:
    tat: float = 0.0
    level: int = 0
    last: float = float("-inf")
    until: float = 0.0


@dataclass
class LocalStore:
    """This process's own state, the same maths as the shared stores'."""

    name: str = "process"
    buckets: dict[str, _Bucket] = field(default_factory=dict)
    # key -> lease -> when it expires; key -> holder -> when it expires
    leases: dict[str, dict[str, float]] = field(default_factory=dict)
    holders: dict[str, dict[str, float]] = field(default_factory=dict)

    async def reserve(
        self, key: str, interval: float, window: float
    ) -> tuple[bool, float]:
        bucket = self.buckets.setdefault(key, _Bucket())
        answer = reservation(bucket.tat, time.monotonic(), interval, window)
        if answer.tat is not None:
            bucket.tat = answer.tat
        return answer.reserved, answer.wait

    async def backoff_raise(self, key: str) -> int:
        bucket = self.buckets.setdefault(key, _Bucket())
        now = time.monotonic()
        if bucket.until <= now:
            bucket.level, bucket.last = 1, now
        elif now - bucket.last >= THROTTLE_COOLDOWN:
            bucket.level, bucket.last = min(bucket.level + 1, MAX_LEVEL), now
        bucket.until = now + BACKOFF_HOLD
        return bucket.level

    async def backoff_level(self, key: str) -> int:
        bucket = self.buckets.get(key)
        if bucket is None or bucket.until <= time.monotonic():
            return 0
        return bucket.level

    async def lease_take(
        self, key: str, holder: str, leases: list[str], size: int, ttl: float
    ) -> tuple[int, int]:
        now = time.monotonic()
        held = self.leases.setdefault(key, {})
        holders = self.holders.setdefault(key, {})
        for table in (held, holders):
            for expired in [name for name, until in table.items() if until <= now]:
                del table[expired]
        holders[holder] = now + ttl
        granted = max(0, min(len(leases), size - len(held)))
        for lease in leases[:granted]:
            held[lease] = now + ttl
        return granted, len(holders)

    async def lease_renew(
        self, key: str, holder: str, leases: list[str], ttl: float
    ) -> tuple[int, list[str]]:
        now = time.monotonic()
        held = self.leases.get(key, {})
        lost = []
        for lease in leases:
            if held.get(lease, now) > now:
                held[lease] = now + ttl
            else:
                lost.append(lease)
        holders = self.holders.setdefault(key, {})
        for expired in [name for name, until in holders.items() if until <= now]:
            del holders[expired]
        holders[holder] = now + ttl
        return len(holders), lost

    async def lease_drop(self, key: str, leases: list[str]) -> None:
        held = self.leases.get(key)
        if held is not None:
            for lease in leases:
                held.pop(lease, None)
            if not held:
                del self.leases[key]

    async def lease_leave(self, key: str, holder: str, leases: list[str]) -> None:
        await self.lease_drop(key, leases)
        holders = self.holders.get(key)
        if holders is not None:
            holders.pop(holder, None)
            if not holders:
                del self.holders[key]


# Shared by every run of this process (the embedded mode's "across runs"),
# and what a failing shared store falls back to.
PROCESS = LocalStore()


class PostgresStore:
    name = "postgresql"

    def __init__(self) -> None:
        self._reserve = database_sync_to_async(limits_store.bucket_reserve)
        self._raise = database_sync_to_async(limits_store.backoff_raise)
        self._level = database_sync_to_async(limits_store.backoff_level)
        self.lease_take = database_sync_to_async(limits_store.lease_take)
        self.lease_renew = database_sync_to_async(limits_store.lease_renew)
        self.lease_drop = database_sync_to_async(limits_store.lease_drop)
        self.lease_leave = database_sync_to_async(limits_store.lease_leave)

    async def reserve(
        self, key: str, interval: float, window: float
    ) -> tuple[bool, float]:
        return await self._reserve(key, interval, window)

    async def backoff_raise(self, key: str) -> int:
        return await self._raise(key, cooldown=THROTTLE_COOLDOWN, hold=BACKOFF_HOLD)

    async def backoff_level(self, key: str) -> int:
        return await self._level(key)


class RedisStore:
    name = "redis"

    def __init__(self, url: str) -> None:
        self.client = redis_client(url)
        self._reserve = self.client.register_script(RESERVE_LUA)
        self._raise = self.client.register_script(BACKOFF_RAISE_LUA)
        self._take = self.client.register_script(LEASE_TAKE_LUA)
        self._renew = self.client.register_script(LEASE_RENEW_LUA)
        self._leave = self.client.register_script(LEASE_LEAVE_LUA)

    async def reserve(
        self, key: str, interval: float, window: float
    ) -> tuple[bool, float]:
        reserved, wait = await self._reserve(
            keys=[REDIS_PREFIX + key + ":rate"], args=[interval, window]
        )
        return bool(reserved), float(wait)

    async def backoff_raise(self, key: str) -> int:
        hold_ms = int(BACKOFF_HOLD * 1000)
        level = await self._raise(
            keys=[REDIS_PREFIX + key + ":backoff"],
            args=[THROTTLE_COOLDOWN, hold_ms, MAX_LEVEL],
        )
        return int(level)

    async def backoff_level(self, key: str) -> int:
        level = await self.client.hget(REDIS_PREFIX + key + ":backoff", "level")
        return int(level) if level is not None else 0

    def lease_keys(self, key: str) -> list[str]:
        return [REDIS_PREFIX + key + ":leases", REDIS_PREFIX + key + ":holders"]

    async def lease_take(
        self, key: str, holder: str, leases: list[str], size: int, ttl: float
    ) -> tuple[int, int]:
        granted, holders = await self._take(
            keys=self.lease_keys(key), args=[holder, size, ttl, *leases]
        )
        return int(granted), int(holders)

    async def lease_renew(
        self, key: str, holder: str, leases: list[str], ttl: float
    ) -> tuple[int, list[str]]:
        holders, *lost = await self._renew(
            keys=self.lease_keys(key), args=[holder, ttl, *leases]
        )
        return int(holders), [lease.decode() for lease in lost]

    async def lease_drop(self, key: str, leases: list[str]) -> None:
        if leases:
            await self.client.zrem(REDIS_PREFIX + key + ":leases", *leases)

    async def lease_leave(self, key: str, holder: str, leases: list[str]) -> None:
        await self._leave(keys=self.lease_keys(key), args=[holder, *leases])

    async def aclose(self) -> None:
        await self.client.aclose()


def shared_store() -> Store:
    """Redis if configured, else PostgreSQL if that is the database, else this
    process."""
    if settings.REDIS_URL:
        return RedisStore(settings.REDIS_URL)
    if connection.vendor == "postgresql":
        return PostgresStore()
    return PROCESS


def _store_errors(store: Store) -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (DatabaseError, OSError, TimeoutError)
    if isinstance(store, RedisStore):
        # Imported only with Redis: the import costs a run's start 45 ms.
        from redis.exceptions import RedisError

        # ValueError: a value that is not a number, which only another writer
        # to the Redis server can have put there.
        errors = (RedisError, ValueError, *errors)
    return errors


class Degrading:
    """A shared store that falls back to this process's state while it fails."""

    def __init__(self, store: Store, run_id: int) -> None:
        self.store = store
        self.run_id = run_id
        self.failed_at: float | None = None
        self.errors = _store_errors(store)

    @property
    def shared(self) -> bool:
        return self.store is not PROCESS

    async def call(self, method: str, *args: Any) -> Any:
        fallback = getattr(PROCESS, method)
        if not self.shared:
            return await fallback(*args)
        if (
            self.failed_at is not None
            and time.monotonic() - self.failed_at < RETRY_SHARED_AFTER
        ):
            return await fallback(*args)
        try:
            answer = await getattr(self.store, method)(*args)
        except self.errors as exc:
            if self.failed_at is None:
                logger.warning(
                    "run %s: the shared limits in %s are unavailable (%s: %s); "
                    "pacing calls by this process alone until they are back",
                    self.run_id,
                    self.store.name,
                    type(exc).__name__,
                    exc,
                )
            self.failed_at = time.monotonic()
            return await fallback(*args)
        if self.failed_at is not None:
            logger.warning(
                "run %s: the shared limits in %s are back", self.run_id, self.store.name
            )
            self.failed_at = None
        return answer

    async def aclose(self) -> None:
        close = getattr(self.store, "aclose", None)
        if close is not None:
            try:
                await close()
            except self.errors as exc:
                logger.warning("closing the shared limits' store: %s", exc)


class SharedRateLimiter:
    """At most ``rpm`` calls a minute to the target, with every other caller."""

    def __init__(self, store: Degrading, key: str, rpm: float) -> None:
        self.store = store
        self.key = key
        self.interval = 60.0 / rpm
        # Bursts of a second's worth of calls, as the local limiter allowed.
        self.window = max(self.interval, 1.0)

    async def acquire(self) -> None:
        while True:
            reserved, wait = await self.store.call(
                "reserve", self.key, self.interval, self.window
            )
            if wait > 0:
                await asyncio.sleep(wait)
            if reserved:
                return


class SharedConcurrency(AdaptiveConcurrency):
    """Adaptive concurrency whose halvings every worker on the target makes."""

    def __init__(self, maximum: int, *, adaptive: bool, store: Degrading, key: str):
        super().__init__(maximum, adaptive=adaptive)
        self.store = store
        self.key = key
        self.seen = 0  # the shared level this execution has applied
        self.pending: set[asyncio.Task[None]] = set()

    def throttled(self) -> None:
        if self.burst():
            task = asyncio.ensure_future(self.announce())
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def announce(self) -> None:
        self.apply(await self.store.call("backoff_raise", self.key), own=True)

    async def sync(self) -> None:
        if self.adaptive:
            self.apply(await self.store.call("backoff_level", self.key))

    def apply(self, level: int, *, own: bool = False) -> None:
        """Halve once per level not yet applied; an expired level only resets.

        A burst of this execution's own that the store absorbed (another
        worker's halving within the cooldown, already applied) halves nothing
        more; one that began a new level after the old one expired halves.
        """
        if level > self.seen:
            self.decrease(level - self.seen)
        elif own and level < self.seen:
            self.decrease()
        self.seen = level

    async def aclose(self) -> None:
        # A burst announced as the run ends still slows the others: let its
        # announcement reach the store (the stores' calls have timeouts).
        await settle(self.pending)


class LeasedConcurrency(SharedConcurrency):
    """A shard's concurrency, whose calls also hold leases of the run's."""

    def __init__(
        self, maximum: int, *, adaptive: bool, store: Degrading, key: str, run_id: int
    ) -> None:
        super().__init__(maximum, adaptive=adaptive, store=store, key=key)
        self.leases = RunLeases(
            store, run_key(run_id), maximum, float(settings.EVALSITE_STALL_SECONDS)
        )

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with super().slot():
            lease = await self.leases.take()
            try:
                yield
            finally:
                self.leases.give_back(lease)

    async def sync(self) -> None:
        await super().sync()
        await self.leases.renew()

    async def aclose(self) -> None:
        await super().aclose()
        await self.leases.aclose()


class SharedRetryBudget:
    """The run's retry budget, spent by all its executors (``Run.retries_used``)."""

    def __init__(self, run_id: int, total: int | None) -> None:
        self.run_id = run_id
        self.total = total
        self.local = RetryBudget(total)  # while the database is unavailable
        self._take = database_sync_to_async(limits_store.retry_take)

    async def take(self) -> bool:
        if self.total is None:
            return True
        try:
            return await self._take(self.run_id, self.total)
        except DatabaseError as exc:
            logger.warning(
                "run %s: the shared retry budget is unavailable (%s); "
                "counting this process's retries alone",
                self.run_id,
                exc,
            )
            return self.local.spend()


class Pacing:
    """The shared limits of one execution, given to its item runner."""

    def __init__(
        self, *, run_id: int, key: str, options: RunOptions, shard: bool = False
    ) -> None:
        self.key = key
        self.store = Degrading(shared_store(), run_id)
        # A shard's calls hold leases of the run's concurrency (``RunLeases``).
        self.concurrency = (
            LeasedConcurrency(
                options.concurrency,
                adaptive=options.adaptive_concurrency,
                store=self.store,
                key=key,
                run_id=run_id,
            )
            if shard
            else SharedConcurrency(
                options.concurrency,
                adaptive=options.adaptive_concurrency,
                store=self.store,
                key=key,
            )
        )
        self.rate = (
            SharedRateLimiter(self.store, key, options.rate_limit_rpm)
            if options.rate_limit_rpm
            else None
        )
        self.budget = SharedRetryBudget(run_id, options.retry_budget)

    async def sync(self) -> None:
        """Take up the back-off other workers announced, renew the run's
        leases (each watch tick)."""
        await self.concurrency.sync()

    async def aclose(self) -> None:
        await self.concurrency.aclose()
        await self.store.aclose()

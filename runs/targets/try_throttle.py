"""How many "send one request" tries a person may make.

At most ``EVALSITE_TRIES_AT_ONCE`` at a time and ``EVALSITE_TRY_PER_MINUTE``
in any minute, per user. The counts are kept in Redis when ``REDIS_URL`` is
set (one Lua script per try: atomic, timed by Redis's clock, shared by every
server process), otherwise in this process's memory. A try that is refused
raises ``TooManyRequests`` with the seconds to wait (``Retry-After``).

A try held in Redis carries a lease: a server killed while it waits frees its
slot when the lease ends, not never. While Redis cannot be reached, tries
are counted by this process alone, with a warning.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from django.conf import settings

from runs.calls.limits_redis import redis_client
from runs.errors import TooManyRequests
from runs.records.installation import database_id

logger = logging.getLogger(__name__)

WINDOW = 60.0  # seconds: the per-minute count
REDIS_PREFIX = "evalsite:try:"

# KEYS: the user's tries in flight (member: token, score: end of its lease)
# and in the last minute (score: when it began). ARGV: token, at_once,
# per minute, lease, window. Answers {1, 0} or {0, seconds to wait, reason}.
ACQUIRE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local window = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return {0, '0', 'at_once'}
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {0, string.format('%.3f', tonumber(oldest[2]) + window - now), 'rate'}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[4])) + 1)
redis.call('EXPIRE', KEYS[2], math.ceil(window) + 1)
return {1, '0', ''}
"""


@dataclass
class _Tries:
    in_flight: int = 0
    started: deque[float] = field(default_factory=deque)


class LocalCounts:
    """This process's counts: a lock, never held across an await."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users: dict[str, _Tries] = {}

    def acquire(self, key: str, at_once: int, per_minute: int) -> str:
        """'' when a slot was taken, else the reason and the wait, as 'rate:12.5'."""
        now = time.monotonic()
        with self.lock:
            tries = self.users.setdefault(key, _Tries())
            while tries.started and tries.started[0] <= now - WINDOW:
                tries.started.popleft()
            if tries.in_flight >= at_once:
                return "at_once:0"
            if len(tries.started) >= per_minute:
                return f"rate:{tries.started[0] + WINDOW - now:.3f}"
            tries.in_flight += 1
            tries.started.append(now)
            return ""

    def release(self, key: str) -> None:
        with self.lock:
            tries = self.users.get(key)
            if tries is None:
                return
            tries.in_flight = max(0, tries.in_flight - 1)
            if not tries.in_flight and not tries.started:
                del self.users[key]

    def clear(self) -> None:
        with self.lock:
            self.users.clear()


PROCESS = LocalCounts()


def _user_key(user_id: int) -> str:
    # User ids are per database: two installations may share one Redis.
    return f"{database_id()}:{user_id}"


def _refusal(reason: str, wait: float, *, lease: float) -> TooManyRequests:
    at_once = settings.EVALSITE_TRIES_AT_ONCE
    if reason == "at_once":
        # A try ends within its timeout: by then a slot is free.
        return TooManyRequests(
            f"you have {at_once} {'try' if at_once == 1 else 'tries'} "
            "waiting for an answer already; "
            "wait for one to finish",
            retry_after=max(1, math.ceil(lease)),
        )
    per_minute = settings.EVALSITE_TRY_PER_MINUTE
    seconds = max(1, math.ceil(wait))
    return TooManyRequests(
        f"at most {per_minute} {'try' if per_minute == 1 else 'tries'} a minute; "
        f"try again in {seconds} seconds",
        retry_after=seconds,
    )


class _RedisCounts:
    def __init__(self, url: str) -> None:
        self.client = redis_client(url)

    def keys(self, key: str) -> list[str]:
        return [f"{REDIS_PREFIX}{key}:flight", f"{REDIS_PREFIX}{key}:minute"]

    async def acquire(
        self, key: str, token: str, at_once: int, per_minute: int, lease: float
    ) -> str:
        taken, wait, reason = await self.client.eval(
            ACQUIRE_LUA,
            2,
            *self.keys(key),
            token,
            at_once,
            per_minute,
            lease,
            WINDOW,
        )
        return "" if int(taken) else f"{reason.decode()}:{float(wait)}"

    async def release(self, key: str, token: str) -> None:
        await self.client.zrem(self.keys(key)[0], token)


@contextlib.asynccontextmanager
async def try_slot(*, user_id: int, lease: float) -> AsyncIterator[None]:
    """Hold one of the user's tries for at most ``lease`` seconds, or raise
    ``TooManyRequests``."""
    at_once = settings.EVALSITE_TRIES_AT_ONCE
    per_minute = settings.EVALSITE_TRY_PER_MINUTE
    key = _user_key(user_id)
    redis = _RedisCounts(settings.REDIS_URL) if settings.REDIS_URL else None
    token = secrets.token_hex(8)
    try:
        answer = None
        if redis is not None:
            try:
                answer = await redis.acquire(key, token, at_once, per_minute, lease)
            except (OSError, TimeoutError, _redis_error()) as exc:
                logger.warning(
                    "tries are counted by this process alone while Redis is "
                    "unavailable (%s: %s)",
                    type(exc).__name__,
                    exc,
                )
        shared = answer is not None
        if answer is None:
            answer = PROCESS.acquire(key, at_once, per_minute)
        if answer:
            reason, _, wait = answer.partition(":")
            raise _refusal(reason, float(wait), lease=lease)
        try:
            yield
        finally:
            if not shared:
                PROCESS.release(key)
            elif redis is not None:
                try:
                    await redis.release(key, token)
                except (OSError, TimeoutError, _redis_error()) as exc:
                    # The lease frees the slot when it ends.
                    logger.warning("releasing a try in Redis: %s", exc)
    finally:
        if redis is not None:
            await redis.client.aclose()


def _redis_error() -> type[Exception]:
    try:
        from redis.exceptions import RedisError
    except ImportError:  # pragma: no cover - redis is a dependency
        return OSError
    return RedisError

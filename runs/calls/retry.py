"""The call policy: which failures are tried again, how long to wait, and the loop.

One policy for every call made to a model or an agent: a target's attempts
(``runs/executor/items.py``) and a judge's calls (``runs/scorers/llm_judge.py``).
A network error, a timeout, a 5xx and a 429 (honouring Retry-After) are tried
again; anything else would fail the same way, and a spent quota is not
restored by waiting seconds. Waits are exponential with full jitter, capped.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from runs.calls.limits import CallRate
from runs.models import ErrorKind
from runs.pools.shares import InContext

# Only these failures are tried again.
RETRYABLE = frozenset({ErrorKind.TRANSIENT, ErrorKind.TIMEOUT})
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
QUOTA_WORDS = (
    "insufficient_quota",
    "quota exceeded",
    "exceeded your current quota",
    "billing",
)
MAX_RETRY_AFTER_SECONDS = 60.0


def classify_status(status: int, body: str) -> ErrorKind:
    """What an HTTP error status means for a retry: a 429 that speaks of a
    quota or billing is a quota; 408, 425, 429 and 5xx are transient."""
    if status == 429 and any(word in body.lower() for word in QUOTA_WORDS):
        return ErrorKind.QUOTA
    if status in TRANSIENT_STATUSES:
        return ErrorKind.TRANSIENT
    return ErrorKind.PERMANENT


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


class Backoff:
    """How long to wait before retry ``number`` (1 for the first retry).

    Exponential with full jitter, capped; a server's Retry-After wins.
    """

    def __init__(self, base: float = 0.5, maximum: float = 30.0) -> None:
        self.base = base
        self.maximum = maximum
        self.random = random.Random()

    def delay(self, number: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return retry_after  # already capped when parsed
        ceiling = min(self.maximum, self.base * 2 ** (number - 1))
        return self.random.uniform(0, ceiling)


class Failure(Protocol):
    """What the policy reads of a failed attempt."""

    @property
    def kind(self) -> ErrorKind: ...

    @property
    def retry_after(self) -> float | None: ...


@dataclass(slots=True)
class RetryPolicy:
    """How many attempts a call gets, each under what timeout, and the waits."""

    max_attempts: int
    timeout: float
    backoff: Backoff = field(default_factory=Backoff)

    def retries(self, number: int, failure: Failure) -> bool:
        """Whether attempt ``number``, failed so, is followed by another."""
        return failure.kind in RETRYABLE and number < self.max_attempts

    def delay(self, number: int, failure: Failure) -> float:
        return self.backoff.delay(number, failure.retry_after)


class RetryTokens(Protocol):
    """A run's retry budget: one token a retry, None when it is spent."""

    async def take(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class RunRetries:
    """The retry rules of the run a call is made in: the attempts an item
    gets, their back-off, and the run's retry budget (shared by its
    executors). A target that makes several calls for one item (an agent's
    loop) retries each by them, and the item is then not run again
    (``TargetError.call_attempts``): retries at one level, never multiplied."""

    max_attempts: int
    backoff: Backoff
    budget: RetryTokens | None = None


_run_retries: contextvars.ContextVar[RunRetries | None] = contextvars.ContextVar(
    "evalsite_run_retries", default=None
)


def use_run_retries(retries: RunRetries | None) -> AbstractContextManager[None]:
    """Make ``retries`` the ones ``run_retries`` gives, in this context and
    its tasks."""
    return InContext(_run_retries, retries)


def run_retries() -> RunRetries | None:
    """The run's retry rules, inside a run."""
    return _run_retries.get()


class GaveUp[F](Exception):
    """The last failure of a call the policy tries no more, and its attempts."""

    def __init__(self, failure: F, attempts: int) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.attempts = attempts


async def with_retries[T, F: BaseException](
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    failures: type[F],
    timed_out: Callable[[float], F],
    budget: RetryTokens | None = None,
    pace: CallRate | None = None,
) -> T:
    """``call`` under the per-attempt timeout, tried again by ``policy`` while
    ``budget`` (a run's) has a retry left, each retry paced by ``pace`` (a
    run's request rate) as any call is.

    A raised ``failures`` (which has ``kind`` and ``retry_after``) or a
    timeout (``timed_out(seconds)`` makes its failure) that is not tried
    again ends in ``GaveUp``.
    """
    number = 0
    while True:
        number += 1
        try:
            async with asyncio.timeout(policy.timeout):
                return await call()
        except TimeoutError:
            failure = timed_out(policy.timeout)
        except failures as exc:
            failure = exc
        # ``failures`` have a kind and a Retry-After (the Failure protocol); a
        # type variable bound to a protocol cannot also be an exception type.
        if not policy.retries(number, failure):  # type: ignore[arg-type]  # see above
            raise GaveUp(failure, number)
        if budget is not None and not await budget.take():
            raise GaveUp(failure, number)
        await asyncio.sleep(policy.delay(number, failure))  # type: ignore[arg-type]  # see above
        if pace is not None:
            await pace.acquire()

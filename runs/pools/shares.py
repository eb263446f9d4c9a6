"""Scorer workers shared fairly: no project's runs hold every one of them.

The scorer workers of a process (threads, and worker processes for CPU-heavy
scorers) serve every run at once. A run whose scorer overruns its timeout
would otherwise take them all: a thread cannot be stopped, so it holds its
worker until it returns, and every other run's scores then fail waiting for
a free one ("all 4 busy"). So each pool is shared by owner, the project of
the run being scored: an owner holds at most ``limit`` of a pool's workers
at once, and waits its turn beyond that. A call holds its share from the
moment it is given one until its worker is free again (for a thread, when
the thread returns, not when its caller stopped waiting), so an owner whose
scorers overrun waits for itself while the others go on.

Threads still running past their timeout are counted per owner, logged when
they overrun and when they return, and named in the timeout message of the
calls that wait behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections import defaultdict, deque
from concurrent.futures import Future

logger = logging.getLogger(__name__)

_owner: contextvars.ContextVar[str] = contextvars.ContextVar(
    "evalsite_scoring_owner", default=""
)


class InContext[T]:
    """``var`` is ``value`` in this context and its tasks, until the block ends.

    A class, not a generator's context manager: entered on every attempt of
    every item (``runs.calls.retry.use_run_retries``) and scorer call."""

    __slots__ = ("token", "value", "var")

    def __init__(self, var: contextvars.ContextVar[T], value: T) -> None:
        self.var = var
        self.value = value

    def __enter__(self) -> None:
        self.token = self.var.set(self.value)

    def __exit__(self, *exc: object) -> None:
        self.var.reset(self.token)


def scoring_for(owner: str) -> contextlib.AbstractContextManager[None]:
    """Count the scorer work of this context and its tasks against ``owner``."""
    return InContext(_owner, owner)


def owner(project_id: int | None) -> str:
    """The owner a project's runs score as."""
    return "" if project_id is None else f"project {project_id}"


def current_owner() -> str:
    """Whose scoring this is ("" outside a run: one owner for all such work)."""
    return _owner.get()


def share_limit(size: int, per_owner: int) -> int:
    """The most workers of a pool of ``size`` one owner holds: never all of
    them when there are two or more, so that another owner always has one."""
    return 1 if size < 2 else max(1, min(per_owner, size - 1))


class Progress:
    """What a scorer call is waiting for, if anything (for its timeout message)."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = ""


_progress: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "evalsite_scorer_progress", default=None
)


def tracking(progress: Progress) -> contextlib.AbstractContextManager[None]:
    """Let ``note_waiting`` write to ``progress`` within the block."""
    return InContext(_progress, progress)


def note_waiting(waiting: str) -> None:
    """Say what the current scorer call waits for ("" once it is working)."""
    progress = _progress.get()
    if progress is not None:
        progress.waiting = waiting


class Shares:
    """Per-owner shares of one pool of ``size`` workers (thread-safe)."""

    def __init__(self, noun: str, size: int, limit: int) -> None:
        self.noun = noun  # "scorer worker", "scorer process"
        self.size = size
        self.limit = limit
        self._lock = threading.Lock()
        self._held: dict[str, int] = defaultdict(int)
        self._waiters: dict[str, deque[Future[None]]] = defaultdict(deque)
        self._overrunning: dict[str, int] = defaultdict(int)

    async def acquire(self, owner: str) -> None:
        """Wait until ``owner`` may use one more worker, and take it."""
        with self._lock:
            if self._held[owner] < self.limit:
                self._held[owner] += 1
                return
            turn: Future[None] = Future()
            self._waiters[owner].append(turn)
        note_waiting(self.waiting_for_share(owner))
        try:
            await asyncio.wrap_future(turn)
        except asyncio.CancelledError:
            if not turn.cancel():  # handed over as we stopped waiting
                self.release(owner)
            raise
        note_waiting("")

    def release(self, owner: str) -> None:
        """Give back a worker of ``owner``'s (from any thread)."""
        with self._lock:
            waiters = self._waiters[owner]
            while waiters:
                turn = waiters.popleft()
                if turn.set_running_or_notify_cancel():
                    turn.set_result(None)  # the share passes to the next call
                    return
            self._held[owner] -= 1
            if not self._held[owner]:
                del self._held[owner]
                del self._waiters[owner]

    def overran(self, owner: str, scorer: str) -> None:
        """A call of ``owner``'s runs on past its timeout, holding its worker."""
        with self._lock:
            self._overrunning[owner] += 1
            count = sum(self._overrunning.values())
        logger.warning(
            "scorer %s (%s) overran its timeout and cannot be stopped: its %s "
            "stays busy until it returns (%d of %d running past their timeout)",
            scorer,
            owner or "no project",
            self.noun,
            count,
            self.size,
        )

    def returned(self, owner: str, scorer: str) -> None:
        """A call that overran its timeout has returned; its worker is free."""
        with self._lock:
            self._overrunning[owner] -= 1
            if not self._overrunning[owner]:
                del self._overrunning[owner]
        logger.warning(
            "scorer %s (%s) returned after its timeout; its %s is free again",
            scorer,
            owner or "no project",
            self.noun,
        )

    def overrunning(self, owner: str | None = None) -> int:
        """Calls running past their timeout (of ``owner``, or of everyone)."""
        with self._lock:
            if owner is None:
                return sum(self._overrunning.values())
            return self._overrunning.get(owner, 0)

    def held(self, owner: str) -> int:
        with self._lock:
            return self._held.get(owner, 0)

    def waiting_for_share(self, owner: str) -> str:
        late = self.overrunning(owner)
        note = f", {_past(late)}" if late else ""
        whose = "this project's runs" if owner else "scoring outside a run"
        return (
            f"waiting for a free {self.noun}: {whose} already use {self.limit} of "
            f"the {self.size}, the most one project may{note}"
        )

    def waiting_for_pool(self) -> str:
        late = self.overrunning()
        note = f", {_past(late)}" if late else ""
        return f"waiting for a free {self.noun} (all {self.size} busy{note})"


def _past(count: int) -> str:
    if count == 1:
        return "1 of them still running past its timeout"
    return f"{count} of them still running past their timeout"

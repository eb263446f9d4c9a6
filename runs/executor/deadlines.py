"""The per-attempt timeout: ``asyncio.timeout``'s behaviour, without a timer
made and cancelled for every attempt."""

from __future__ import annotations

import asyncio
import contextvars
from types import TracebackType

__all__ = ["attempt_deadline"]


class TaskDeadline:
    """The deadline of the attempt a task (a worker) is making, if any.

    ``asyncio.timeout`` schedules a timer for every attempt and cancels it
    when the attempt ends, nearly always long before it would fire: a timer
    handle made, pushed on the loop's heap, cancelled and swept, for every
    call of a run. This one keeps one timer per task, lazily: an attempt
    that begins while the timer of an earlier one is still pending leaves it
    (that timer fires at or before the new deadline, as attempts begin in
    order); when it fires it cancels the task if the attempt it finds has
    reached its deadline, else sets itself for that attempt's deadline. So
    the task is cancelled at its attempt's deadline, as ``asyncio.timeout``
    cancels it, and a task whose attempts take far less than the timeout
    makes one timer per timeout's length rather than one per attempt.

    Entered as ``asyncio.timeout`` is, with the same outcome: a
    ``TimeoutError`` from the ``CancelledError`` its own cancel caused, and
    any other cancel left as it was.
    """

    __slots__ = (
        "cancelling",
        "deadline",
        "expired",
        "handle",
        "loop",
        "set_for",
        "task",
    )

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.loop = task.get_loop()
        self.deadline: float | None = None  # of the attempt under way
        self.handle: asyncio.TimerHandle | None = None
        self.set_for = 0.0  # the deadline the pending timer was set for
        self.expired = False
        self.cancelling = 0

    def begin(self, seconds: float) -> TaskDeadline:
        self.deadline = self.loop.time() + seconds
        return self

    async def __aenter__(self) -> TaskDeadline:
        self.cancelling = self.task.cancelling()
        self.expired = False
        if self.handle is None:
            self.arm()
        elif self.deadline is not None and self.deadline < self.set_for:
            self.handle.cancel()  # a shorter timeout than the earlier attempt's
            self.arm()
        return self

    def arm(self) -> None:
        assert self.deadline is not None
        self.set_for = self.deadline
        self.handle = self.loop.call_at(self.deadline, self.fire)

    def fire(self) -> None:
        self.handle = None
        if self.deadline is None:
            return  # no attempt under way: the next one sets a timer
        if self.deadline > self.set_for:
            self.arm()  # set for an earlier attempt: now for this one's
            return
        self.expired = True
        self.task.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.deadline = None  # the timer, if pending, stays for the next one
        if not self.expired:
            return
        self.expired = False
        if self.task.uncancel() <= self.cancelling and exc_type is not None:
            # No other cancel was asked for: this one was ours.
            if issubclass(exc_type, asyncio.CancelledError):
                raise TimeoutError from exc
            if exc is not None:
                mark_timeout(exc)
                if isinstance(exc, BaseExceptionGroup):
                    for each in exc.exceptions:
                        mark_timeout(each)


def mark_timeout(exc: BaseException) -> None:
    """Put a TimeoutError between an error and the cancel it came from, as
    ``asyncio.timeout`` does for an error raised while it was cancelled."""
    while exc.__context__ is not None:
        if isinstance(exc.__context__, asyncio.CancelledError):
            timeout = TimeoutError()
            timeout.__context__ = timeout.__cause__ = exc.__context__
            exc.__context__ = timeout
            return
        exc = exc.__context__


_deadline: contextvars.ContextVar[TaskDeadline | None] = contextvars.ContextVar(
    "evalsite_attempt_deadline", default=None
)


def attempt_deadline(seconds: float) -> TaskDeadline:
    """``asyncio.timeout(seconds)`` for one attempt of the current task, to
    enter with ``async with``: the task's one timer (made on its first
    attempt, kept in its context) set for this attempt's deadline."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("an attempt's deadline is kept inside a task")
    deadline = _deadline.get()
    if deadline is None or deadline.task is not task:
        # A task inherits its parent's context: the parent's timer is not its.
        deadline = TaskDeadline(task)
        _deadline.set(deadline)
    return deadline.begin(seconds)

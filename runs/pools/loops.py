"""The event loops evalsite makes, and work run off the caller's event loop,
on a loop of its own in a daemon thread.

The loops evalsite makes itself to run its work (``evalrun``, ``evalworker``,
the demo's run, the launcher's and the alerts' sender's ``LoopOwner``) are
uvloop's: libuv's transports and callbacks in C spend about a sixth less CPU
on an HTTP item than asyncio's own loop (bench/README.md, "CPU per item").
Three kinds are asyncio's: the server's (Daphne's, through Twisted), the
sandbox's (``new_asyncio_loop``: uvloop cannot start a process as another
user), and the short ones ``async_to_sync`` makes for a call from sync code.

The executor's local launcher, the alerts' sender and the sandbox each keep
one: work submitted from a request, a command or a test goes on there, never
on the loop (or in the thread) of whoever submitted it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop, of the kind evalsite runs its own work on."""
    return uvloop.new_event_loop()


def new_asyncio_loop() -> asyncio.AbstractEventLoop:
    """asyncio's own loop, for what uvloop cannot do: start a process as
    another user (``user=``, ``group=``, ``extra_groups=``: the sandbox's)."""
    return asyncio.new_event_loop()


def run[T](main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a loop of ``new_loop``: what a command runs."""
    return asyncio.run(main, loop_factory=new_loop)


class LoopOwner:
    """Holds the loop its work runs on: one bound to it (the server's), else
    its own, started in a daemon thread named ``thread_name`` on first use,
    and again once that one is closed. ``lock`` guards ``loop``."""

    def __init__(
        self,
        thread_name: str,
        factory: Callable[[], asyncio.AbstractEventLoop] = new_loop,
    ) -> None:
        self.thread_name = thread_name
        self.factory = factory
        self.loop: asyncio.AbstractEventLoop | None = None
        # The loop's thread when the loop is this owner's own (None when bound).
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None or not self._alive(self.loop):
                loop = self.factory()
                thread = threading.Thread(
                    target=loop.run_forever, name=self.thread_name, daemon=True
                )
                thread.start()
                self.loop, self.thread = loop, thread
            return self.loop

    async def run_here[T](self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` executed on this owner's loop, from another loop.

        A cancel of the caller cancels ``work`` and waits for its end (its
        ``finally`` blocks: a program's tree killed, a file removed) before
        the cancel goes on, as if ``work`` had run on the caller's loop.
        Whatever ``work`` raises comes back to the caller, ``SystemExit``
        and ``KeyboardInterrupt`` too, and the owner's loop goes on.
        """
        loop = self._ensure_loop()
        ended: concurrent.futures.Future[T] = concurrent.futures.Future()
        started: list[asyncio.Task[None]] = []

        async def guarded() -> None:
            try:
                ended.set_result(await work)
            except asyncio.CancelledError:
                ended.cancel()
                raise
            except BaseException as exc:  # handed over; never out of the loop
                ended.set_exception(exc)

        def start() -> None:
            # A fresh context: the work must not see the caller's variables.
            guard = guarded()
            try:
                task = loop.create_task(guard, context=contextvars.Context())
            except BaseException as exc:  # the loop is closing
                guard.close()
                work.close()
                ended.set_exception(exc)
                return
            started.append(task)

        def cancel() -> None:
            # Queued after start() on the same loop.
            if started:
                started[0].cancel()

        loop.call_soon_threadsafe(start)
        waiting = asyncio.wrap_future(ended)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            loop.call_soon_threadsafe(cancel)
            while not waiting.done() and self._alive(loop):
                with contextlib.suppress(BaseException):
                    await asyncio.shield(waiting)
            raise

    def _alive(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether ``loop`` still runs (its thread, when it is this owner's)."""
        return not loop.is_closed() and (self.thread is None or self.thread.is_alive())


async def to_the_end[T](work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile;
    the cancel goes on once ``work`` has ended (cleaning up after a program:
    a cancel in the middle would leave part of it undone)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise  # the work itself was cancelled
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError
        return result

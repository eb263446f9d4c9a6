"""The event loops evalsite makes, and work run off the caller's event loop,
on a loop of its own in a daemon thread.

Every loop evalsite makes itself (``evalrun``, ``evalworker``, the loops of
``LoopOwner``) is uvloop's: libuv's transports and callbacks in C spend about
a sixth less CPU on an HTTP item than asyncio's own loop (bench/README.md,
"CPU per item"). The server's loop is its own (Daphne's, through Twisted).

The executor's local launcher and the alerts' sender each keep one: work
submitted from a request, a command or a test goes on there, never on the
loop (or in the thread) of whoever submitted it.
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
        self.lock = threading.Lock()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None or self.loop.is_closed():
                loop = self.factory()
                thread = threading.Thread(
                    target=loop.run_forever, name=self.thread_name, daemon=True
                )
                thread.start()
                self.loop = loop
            return self.loop

    async def run_here[T](self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` executed on this owner's loop, from another loop.

        A cancel of the caller cancels ``work`` and waits for its end (its
        ``finally`` blocks: a program's tree killed, a file removed) before
        the cancel goes on, as if ``work`` had run on the caller's loop.
        """
        loop = self._ensure_loop()
        ended: concurrent.futures.Future[T] = concurrent.futures.Future()
        started: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                ended.cancel()
            elif (error := task.exception()) is not None:
                ended.set_exception(error)
            else:
                ended.set_result(task.result())

        def start() -> None:
            # A fresh context: the work must not see the caller's variables.
            task = loop.create_task(work, context=contextvars.Context())
            task.add_done_callback(settle)
            started.append(task)

        def cancel() -> None:
            # Queued after start() on the same loop: the task exists.
            started[0].cancel()

        loop.call_soon_threadsafe(start)
        waiting = asyncio.wrap_future(ended)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            loop.call_soon_threadsafe(cancel)
            while not waiting.done():
                with contextlib.suppress(BaseException):
                    await asyncio.shield(waiting)
            raise

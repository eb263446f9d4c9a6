"""Work run off the caller's event loop, on a loop of its own in a daemon thread.

The executor's local launcher and the alerts' sender each keep one: work
submitted from a request, a command or a test goes on there, never on the
loop (or in the thread) of whoever submitted it.
"""

from __future__ import annotations

import asyncio
import threading


class LoopOwner:
    """Holds the loop its work runs on: one bound to it (the server's), else
    its own, started in a daemon thread named ``thread_name`` on first use,
    and again once that one is closed. ``lock`` guards ``loop``."""

    def __init__(self, thread_name: str) -> None:
        self.thread_name = thread_name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lock = threading.Lock()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None or self.loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=self.thread_name, daemon=True
                )
                thread.start()
                self.loop = loop
            return self.loop

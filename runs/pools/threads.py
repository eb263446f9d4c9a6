"""Scorer work in the process's pool of worker threads, shared per project.

The event loop must not compute (``runs/plugins/scoring.py``), so a scorer's
CPU work runs in a bounded pool of threads. A thread cannot be stopped: one
past its timeout holds its worker until it returns. So the pool is shared by
project (``runs/pools/shares.py``): a project's runs hold at most
``EVALSITE_SCORER_WORKERS_PER_PROJECT`` threads at once, counted until each
thread returns, and a thread past its timeout is counted, logged and named
in the timeout messages of the calls waiting behind it. Work that an input
can make unbounded belongs in a killable process instead
(``runs/pools/processes.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings

from runs.pools.shares import Shares, current_owner, note_waiting, share_limit

_pool: ThreadPoolExecutor | None = None
_shares: Shares | None = None
_lock = threading.Lock()


def scorer_pool() -> ThreadPoolExecutor:
    """The process's scorer worker pool, created on first use."""
    return _threads()[0]


def thread_shares() -> Shares:
    """Who holds the scorer worker threads (per project)."""
    return _threads()[1]


def _threads() -> tuple[ThreadPoolExecutor, Shares]:
    global _pool, _shares
    with _lock:
        if _pool is None or _shares is None:
            workers = settings.EVALSITE_SCORER_WORKERS
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scorer")
            limit = share_limit(workers, settings.EVALSITE_SCORER_WORKERS_PER_PROJECT)
            _shares = Shares("scorer worker", workers, limit)
        return _pool, _shares


async def run_in_thread(function: Callable[..., Any], *args: Any, name: str) -> Any:
    """``function(*args)`` in a scorer worker thread, in this context (a run's
    frozen prices go along); ``name`` is the scorer's, for what is logged."""
    pool, shares = _threads()
    owner = current_owner()
    await shares.acquire(owner)
    context = contextvars.copy_context()
    try:
        future = pool.submit(context.run, function, *args)
    except BaseException:
        shares.release(owner)
        raise
    # The share is given back when the thread is free, not when the caller
    # stops waiting: a thread past its timeout still holds it.
    future.add_done_callback(lambda _: shares.release(owner))
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if future.cancel():  # still queued: it never ran
            note_waiting(shares.waiting_for_pool())
        elif not future.done():
            shares.overran(owner, name)
            future.add_done_callback(lambda _: shares.returned(owner, name))
        raise

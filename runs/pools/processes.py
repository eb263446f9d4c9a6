"""CPU-heavy scorer work in worker processes, killed when its time is up.

A thread cannot be stopped: a scorer computing in one past its timeout holds
its worker until it returns, which for a hostile input (a JSON Schema whose
branches multiply, a LaTeX power tower) is never. So the scorers whose work
an input can make unbounded (``json`` with a schema, ``math``) compute in
small pools of worker processes (pebble), one pool per kind of work. The
caller awaits the result on the event loop, holding no thread; when the
run's scorer timeout cancels the wait, the task's process is killed and
replaced, so nothing outlives the timeout. A pool's own limit (``kill_after``)
is a backstop for a caller that sets none.

Each pool is shared fairly between projects (``runs/pools/shares.py``): one
project's runs hold at most some of its processes at once.

Worker processes are forked from a clean forkserver and import only the
module of the function they run and what the kind's ``warm_up`` imports:
those modules need no Django (``runs/pools/math_worker.py``,
``runs/pools/json_validation.py``).
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
import resource
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from runs.pools.shares import Shares, current_owner, note_waiting, share_limit


@dataclass(frozen=True)
class WorkKind:
    """A kind of work and how its worker processes are made."""

    name: str
    # A function, by dotted path, a new worker runs before its first task
    # (imports, so that they are not paid inside a task's timeout).
    warm_up: str
    memory_bytes: int
    # A worker is replaced after this many tasks (caches that only grow).
    max_tasks: int


MATH = WorkKind("math", "runs.pools.math_worker.warm_up", 2 * 1024**3, 500)
JSON = WorkKind("json", "runs.pools.json_validation.warm_up", 1024**3, 2000)

_pools: dict[str, tuple[Any, Shares]] = {}
_lock = threading.Lock()


class WorkTimeout(Exception):
    """The task ran past the pool's own timeout; its process was killed."""


class WorkerEnded(Exception):
    """The worker process ended during the task (killed, out of memory)."""


def _start_worker(warm_up: str, memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    module, name = warm_up.rsplit(".", 1)
    getattr(importlib.import_module(module), name)()


def pool_size() -> int:
    """Processes per kind: one per core and one more, so that a project
    whose share is every core still leaves one to the others; at most the
    scorer workers setting."""
    from django.conf import settings

    return min(settings.EVALSITE_SCORER_WORKERS, (os.cpu_count() or 1) + 1)


def work_pool(kind: WorkKind) -> tuple[Any, Shares]:
    """The pool of ``kind`` and its shares, started on first use."""
    # pebble here, not at the top: the scorers that use a pool are imported by
    # every command's start (the registry), most of which never start one.
    from django.conf import settings
    from pebble import ProcessPool

    with _lock:
        pool, shares = _pools.get(kind.name, (None, None))
        if pool is None or not pool.active or shares is None:
            size = pool_size()
            # forkserver: a worker is forked from a clean, single-threaded
            # process, never from this one with its threads and connections.
            pool = ProcessPool(
                max_workers=size,
                max_tasks=kind.max_tasks,
                initializer=_start_worker,
                initargs=(kind.warm_up, kind.memory_bytes),
                context=multiprocessing.get_context("forkserver"),
            )
            limit = share_limit(size, settings.EVALSITE_SCORER_WORKERS_PER_PROJECT)
            shares = Shares("scorer process", size, limit)
            _pools[kind.name] = (pool, shares)
        return pool, shares


def stop_scorer_processes() -> None:
    """Stop every worker process (at shutdown, or in a test counting them)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool, _ in pools:
        pool.stop()
        pool.join()


async def run_in_process(
    kind: WorkKind,
    function: Callable[..., Any],
    *args: Any,
    kill_after: float,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` in a worker process of ``kind``.

    Cancelling the wait (the scorer timeout) kills the process if the task
    had started; ``kill_after`` (seconds) is the pool's own limit, past
    which the process is killed too and ``WorkTimeout`` raised.
    """
    from pebble import ProcessExpired

    pool, shares = work_pool(kind)
    owner = current_owner()
    await shares.acquire(owner)
    try:
        future = pool.schedule(function, args=args, kwargs=kwargs, timeout=kill_after)
    except BaseException:
        shares.release(owner)
        raise
    # Given back when the task ends, or at once if it is cancelled: pebble
    # kills the process of a cancelled running task.
    future.add_done_callback(lambda _: shares.release(owner))
    try:
        # Shielded: whether the task had started is read before cancelling it.
        return await asyncio.shield(asyncio.wrap_future(future))
    except asyncio.CancelledError:
        if not future.running():
            note_waiting(shares.waiting_for_pool())
        future.cancel()
        raise
    except FutureTimeout:
        raise WorkTimeout from None
    except ProcessExpired as exc:  # killed from outside, or out of memory
        raise WorkerEnded(str(exc)) from None

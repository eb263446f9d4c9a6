"""Math answer equivalence (math-verify) in worker processes, in bounded time.

The ``math`` scorer's work is parsing LaTeX and comparing with SymPy, which on
a hostile expression (``10^{10^{10^{10}}}``, a huge nested fraction) can run
for ever inside C code that no signal interrupts, holding the GIL meanwhile.
math-verify's own timeouts use ``signal.alarm``, which works only in a main
thread, and scorers run in worker threads. So each comparison runs in a small
pool of worker processes (pebble): there, math-verify's alarms work (a task
runs in the process's main thread), and a comparison that outlives its
timeout has its process killed and replaced. A worker also has an address
space limit, so that a runaway power fails with MemoryError instead of
taking the machine's memory.

This module sits outside ``runs.scorers`` so that a worker imports it without
Django: only the standard library and math-verify.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import resource
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

WORKER_MEMORY_BYTES = 2 * 1024**3
# A worker is replaced after this many comparisons: SymPy's caches only grow.
WORKER_TASKS = 500
# Characters of an expression or comparison result shown in a reason.
SHOWN = 120

_pool: Any = None
_pool_lock = threading.Lock()


@dataclass(frozen=True)
class Comparison:
    """What was compared, as text, and whether it agreed."""

    equal: bool
    gold: str
    answer: str
    problem: str = ""


# -- in the worker process -------------------------------------------------------


def _start_worker() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    # math-verify logs each timeout with the whole text it was parsing; the
    # score's reason already says what happened.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    import math_verify  # noqa: F401  (imported once, before the first task)


def _shown(parsed: list[Any]) -> str:
    """A parse as text: the value, and the text it was read from."""
    if not parsed:
        return ""
    value = str(parsed[0])
    source = str(parsed[-1]) if len(parsed) > 1 else value
    value = value if len(value) <= SHOWN else value[: SHOWN - 1] + "…"
    source = source if len(source) <= SHOWN else source[: SHOWN - 1] + "…"
    return value if value == source else f"{value} (from {source})"


def compare(
    golds: list[str], answer: str, *, float_rounding: int, timeout: int
) -> Comparison:
    """Parse the expected answers and the output, and verify them (in a worker)."""
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    try:
        parsed_golds = [parse(gold, parsing_timeout=timeout) for gold in golds]
        parsed_golds = [gold for gold in parsed_golds if gold]
        if not parsed_golds:
            return Comparison(False, "", "", problem="no-gold")
        parsed = parse(answer, parsing_timeout=timeout)
        if not parsed:
            return Comparison(False, _shown(parsed_golds[0]), "")
        for gold in parsed_golds:
            if verify(
                gold,
                parsed,
                float_rounding=float_rounding,
                timeout_seconds=timeout,
                raise_on_error=True,
            ):
                return Comparison(True, _shown(gold), _shown(parsed))
        return Comparison(False, _shown(parsed_golds[0]), _shown(parsed))
    except TimeoutException:
        return Comparison(False, "", "", problem="timeout")
    except MemoryError:
        return Comparison(False, "", "", problem="memory")
    except Exception as exc:  # SymPy's errors have no common base
        return Comparison(False, "", "", problem=f"{type(exc).__name__}: {exc}"[:300])


# -- in the server ---------------------------------------------------------------


def math_pool() -> Any:
    """The process's pool of math workers, started on first use."""
    global _pool
    from django.conf import settings
    from pebble import ProcessPool

    with _pool_lock:
        if _pool is None or not _pool.active:
            workers = min(settings.EVALSITE_SCORER_WORKERS, os.cpu_count() or 1)
            # forkserver: a worker is forked from a clean, single-threaded
            # process, never from this one with its threads and connections.
            _pool = ProcessPool(
                max_workers=workers,
                max_tasks=WORKER_TASKS,
                initializer=_start_worker,
                context=multiprocessing.get_context("forkserver"),
            )
        return _pool


def math_pool_stop() -> None:
    """Stop the math workers (at shutdown, or in a test that counts processes)."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.stop()
            _pool.join()
            _pool = None


class MathTimeout(Exception):
    """The comparison took longer than its timeout; its worker was replaced."""


def compare_in_worker(
    golds: list[str], answer: str, *, float_rounding: int, timeout: int
) -> Comparison:
    """``compare`` in a worker process, killed if it takes over ``timeout`` s.

    math-verify's own alarms (``timeout`` per parse and per comparison) stop
    most slow work inside the worker; the pool's timeout stops the rest.
    """
    from pebble import ProcessExpired

    future = math_pool().schedule(
        compare,
        args=(golds, answer),
        kwargs={"float_rounding": float_rounding, "timeout": timeout},
        timeout=timeout * 2,
    )
    try:
        return future.result()
    except FutureTimeout:
        raise MathTimeout from None
    except ProcessExpired as exc:  # killed from outside, or crashed
        return Comparison(False, "", "", problem=f"the worker ended ({exc})")

"""What the sign-flip test and the paired bootstrap share over differences
grouped by value (``values`` distinct, ``counts`` items with that value):
their moments, and random draws over them in fixed parts, side by side."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

# Draws per chunk (sign vectors x 64-bit words; the bootstrap's resamples x
# distinct values): bounded memory.
CHUNK_DRAWS = 4_000_000
# Parts of the draws, each with its own random stream of the seed: the same
# figures on any machine, however many threads draw them.
STREAMS = 4
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Moments:
    """The grouped differences' count, sum, mean, sum of squared deviations
    from the mean, and sample standard deviation."""

    n: int
    total: float
    mean: float
    squares: float
    sd: float


def moments(values: np.ndarray, counts: np.ndarray) -> Moments:
    n = int(counts.sum())
    total = float(values @ counts)
    mean = total / n
    squares = float(((values - mean) ** 2) @ counts)
    return Moments(n, total, mean, squares, math.sqrt(squares / max(n - 1, 1)))


def draw_pool() -> ThreadPoolExecutor:
    """Threads that draw random parts side by side (sign vectors, bootstrap
    resamples), one per core, at most ``STREAMS``."""
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = min(STREAMS, os.cpu_count() or 1)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="signflip")
        return _pool


def draw_in_parts(
    draws: int,
    seed: np.random.SeedSequence,
    width: int,
    fill: Callable[[np.random.Generator, np.ndarray], None],
) -> None:
    """Call ``fill(rng, where)`` for every chunk of the draws ``0 .. draws - 1``
    (``where``, their positions), each row of ``width`` random numbers.

    The draws are split in ``STREAMS`` fixed parts, each from its own stream
    of ``seed``: the same figures on any machine, however many threads draw
    them (numpy draws without the GIL, so the parts run side by side). A
    chunk holds at most ``CHUNK_DRAWS`` numbers, to bound memory.
    """
    parts = np.array_split(np.arange(draws), STREAMS)
    streams = seed.spawn(STREAMS)
    chunk = max(1, CHUNK_DRAWS // max(width, 1))

    def draw(part: np.ndarray, stream: np.random.SeedSequence) -> None:
        rng = np.random.default_rng(stream)
        for start in range(0, len(part), chunk):
            fill(rng, part[start : start + chunk])

    list(draw_pool().map(draw, parts, streams))

"""Cached values computed once at a time: concurrent misses wait for the first.

When a cached figure expires (a running run's window ends, ``cache_keys.py``),
every request that wants it misses at once. Computed by each on its own
thread, N computations share the process's one interpreter lock and each
takes N times as long. Here the first computes; the others wait for it and
take its value from the cache.

The locks are per key and held only while a key is computed; a computation
that needs another cached value waits on that key's lock, never on its own,
as the keys of what needs what form no cycle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from django.core.cache import cache

_guard = threading.Lock()
# key -> (its lock, how many threads hold or wait for it)
_locks: dict[str, tuple[threading.Lock, int]] = {}


@contextmanager
def one_at_a_time(key: str) -> Iterator[None]:
    """Hold ``key``'s lock: one thread of this process at a time."""
    with _guard:
        lock, users = _locks.get(key) or (threading.Lock(), 0)
        _locks[key] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _guard:
            lock, users = _locks[key]
            if users == 1:
                del _locks[key]
            else:
                _locks[key] = (lock, users - 1)


def waiting(key: str) -> int:
    """How many threads hold or wait for ``key`` now."""
    with _guard:
        return _locks.get(key, (None, 0))[1]


def cached[T](key: str, compute: Callable[[], T], seconds: float) -> T:
    """The value cached under ``key``, else ``compute()`` cached for
    ``seconds``: computed by one thread at a time, the others wait for it."""
    value: Any = cache.get(key)
    if value is not None:
        return cast(T, value)
    with one_at_a_time(key):
        value = cache.get(key)
        if value is None:
            value = compute()
            cache.set(key, value, seconds)
    return cast(T, value)

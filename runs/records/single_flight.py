"""One computation for concurrent misses of one cached value.

A running run stores a batch up to four times a second, and each moves its
``results_version`` (``cache_keys.py``): every figure of it cached under
that version is missed by all the requests that arrive after the batch, at
once. Computed by each on its own thread, N computations of the same value
share the process's one interpreter lock and each takes N times as long.
Here the first miss of a key computes (the leader); the others that miss the
same key meanwhile wait for it and take a copy of its value. The key is the
version: a reader never gets figures older than those it asked for, only
the same ones, computed once.

A follower waits at most ``WAIT_SECONDS``, then computes on its own, as it
does when the leader raised: a slow or failed computation never holds the
others for long, nor hands them its error. A leader that needs the same key
again (it cannot wait for itself) computes it directly. The flights are per
process, as the cache they fill is (a ``LocMemCache``).

A going run's values are keyed by the window they were computed in
(``cache_keys.going_moment``), and every reader of every one of them misses
when the next window starts. ``current`` refreshes them one at a time in
a process: a reader that misses one while another thread is refreshing
takes the latest value of its key's lineage (``cache_keys.lineage``) and
goes on, rather than hold a thread while it waits or computes. Under a
light load every miss finds the refresh free and computes the value of its
window, as before; under a heavy one the refreshes take turns, and a going
run's figures lag by what they cost, at most ``LATEST_WINDOWS`` windows.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, cast

from django.core.cache import cache

from runs.records import cache_keys

WAIT_SECONDS = 10.0


@dataclass(slots=True)
class _Flight:
    leader: int  # the computing thread's ident
    done: threading.Event = field(default_factory=threading.Event)
    # The value, pickled: each follower takes its own copy, as from the cache.
    pickled: bytes | None = None
    waiting: int = 0


_guard = threading.Lock()
_flights: dict[str, _Flight] = {}
# Held by the thread refreshing a going run's value (current); reentrant,
# for the values a refreshed page computes from.
_refreshing = threading.RLock()


def shared[T](key: str, compute: Callable[[], T]) -> T:
    """``compute()``, once for all the threads that ask for ``key`` while it
    runs: the first computes, the others wait (at most ``WAIT_SECONDS``) and
    take a copy of its value."""
    me = threading.get_ident()
    with _guard:
        flight = _flights.get(key)
        if flight is None:
            flight = _flights[key] = _Flight(leader=me)
        elif flight.leader != me:
            flight.waiting += 1
        else:
            flight = None  # the leader asks again: computed directly
    if flight is None:
        return compute()
    if flight.leader != me:
        return _follow(key, flight, compute)
    landed = False
    try:
        value = compute()
        followed = _land(key, flight)
        landed = True
        # Copied only for the followers waiting now (once the flight has
        # landed, a new miss starts its own). A value that cannot be copied
        # leaves each follower to compute its own.
        if followed:
            with suppress(pickle.PicklingError, TypeError, AttributeError):
                flight.pickled = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        return value
    finally:
        if not landed:  # the leader raised: its followers find no value
            _land(key, flight)
        flight.done.set()


def _land(key: str, flight: _Flight) -> bool:
    """End ``flight`` for new misses; whether a follower waits for it."""
    with _guard:
        del _flights[key]
        return flight.waiting > 0


def _follow[T](key: str, flight: _Flight, compute: Callable[[], T]) -> T:
    try:
        flight.done.wait(WAIT_SECONDS)
    finally:
        with _guard:
            flight.waiting -= 1
    if flight.pickled is None:
        # The leader raised or is still at it: compute as if alone.
        return compute()
    return cast(T, pickle.loads(flight.pickled))


def cached[T](key: str, compute: Callable[[], T], seconds: float) -> T:
    """The value cached under ``key``, else ``compute()`` (``shared``), cached
    for ``seconds``."""
    value: Any = cache.get(key)
    if value is not None:
        return cast(T, value)

    def computed() -> T:
        # A leader that just finished may have cached it since the miss.
        found = cache.get(key)
        if found is None:
            found = compute()
            cache.set(key, found, seconds)
        return cast(T, found)

    return current(key, computed)


def current[T](key: str, compute: Callable[[], T]) -> T:
    """``shared(key, compute)`` for a key that missed the cache. For a going
    run's key, when another thread of this process is refreshing a going
    value, the latest value of the key's lineage instead, if one is kept
    (the module's docstring)."""
    lineage = cache_keys.lineage(key)
    if lineage is None:
        return shared(key, compute)
    latest_key, seconds = lineage
    if _refreshing.acquire(blocking=False):
        try:
            value = shared(key, compute)
        finally:
            _refreshing.release()
    else:
        latest = cache.get(latest_key)
        if latest is not None:
            return cast(T, latest)
        value = shared(key, compute)
    cache.set(latest_key, value, seconds)
    return value


def waiting(key: str) -> int:
    """How many threads wait for another's computation of ``key`` now."""
    with _guard:
        flight = _flights.get(key)
        return flight.waiting if flight is not None else 0

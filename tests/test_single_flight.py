"""Concurrent misses of one cached value: one computation, the others wait."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.cache import cache

from runs.records import single_flight

KEY = "single-flight-test"


def wait_for(condition: object, what: str) -> None:
    """Wait on state (a bound only so that a failure does not hang)."""
    deadline = time.monotonic() + 60
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_concurrent_misses_compute_once_and_share_the_value() -> None:
    cache.delete(KEY)
    release = threading.Event()
    computed: list[int] = []

    def compute() -> str:
        computed.append(1)
        release.wait(60)
        return "figures"

    answers: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(single_flight.cached(KEY, compute, 60))
        )
        for _ in range(4)
    ]
    threads[0].start()
    wait_for(lambda: computed, "the first miss computes")
    for thread in threads[1:]:
        thread.start()
    # The three later misses wait for the first rather than compute.
    wait_for(lambda: single_flight.waiting(KEY) == 4, "all four wait on the key")
    release.set()
    for thread in threads:
        thread.join(60)

    assert answers == ["figures"] * 4
    assert computed == [1]
    assert single_flight.waiting(KEY) == 0
    cache.delete(KEY)


def test_a_failed_computation_is_not_cached_and_the_next_one_computes() -> None:
    cache.delete(KEY)

    def fail() -> str:
        raise ValueError("no figures")

    with pytest.raises(ValueError, match="no figures"):
        single_flight.cached(KEY, fail, 60)

    assert single_flight.waiting(KEY) == 0
    assert single_flight.cached(KEY, lambda: "second", 60) == "second"
    cache.delete(KEY)

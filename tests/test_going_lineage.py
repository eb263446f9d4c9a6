"""A going run's cached values, refreshed one at a time in a process.

A going run's figures and pages are keyed by the window they were computed
in, so every reader of every one of them missed at once when the next window
started, and each waited for (or did) its recomputation, holding one of the
server's threads: under the mixed load, a stall of about a quarter of a second
every second (bench/README.md). Now a miss while another thread refreshes a
going value takes the latest value of its key's lineage.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client

from runs.models import Run
from runs.records import cache_keys, single_flight
from tests.analysis import test_summary_running
from tests.factories import store_outcomes
from tests.test_single_flight import wait_for

PASSED = test_summary_running.PASSED
# A run still going, 5 of its 20 results stored.
running = test_summary_running.running


def going_key(name: str) -> str:
    return cache_keys.key("lineage-test", name, cache_keys.going_moment())


class Refreshing:
    """Another thread refreshing the going value of ``key`` while the block
    runs (its computation ends as the block exits)."""

    def __init__(self, key: str) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(
            target=single_flight.cached, args=(key, self._compute, 60)
        )

    def _compute(self) -> str:
        self.started.set()
        self.release.wait(60)
        return "refreshed"

    def __enter__(self) -> Refreshing:
        self.thread.start()
        wait_for(self.started.is_set, "the other thread refreshing")
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(60)


@pytest.fixture
def clean_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def test_a_going_key_names_its_lineage_and_an_exact_one_none(
    held_second: list[int],
) -> None:
    first = going_key("a")
    held_second[0] += 1
    second = going_key("a")

    assert first != second
    assert cache_keys.lineage(first) == cache_keys.lineage(second)
    assert cache_keys.lineage(going_key("b")) != cache_keys.lineage(second)
    assert cache_keys.lineage(cache_keys.key("lineage-test", "a")) is None
    # Kept at most LATEST_WINDOWS of the longest window among its parts.
    wide = cache_keys.key("lineage-test", "a", cache_keys.going_moment(5))
    narrow_lineage, wide_lineage = cache_keys.lineage(first), cache_keys.lineage(wide)
    assert narrow_lineage is not None and wide_lineage is not None
    assert narrow_lineage[1] == cache_keys.LATEST_WINDOWS
    assert wide_lineage[1] == 5 * cache_keys.LATEST_WINDOWS


def test_text_that_looks_like_a_moment_joins_no_lineage() -> None:
    # The mark is keyed by the site's secret: a run's name cannot pass for it.
    forged = "~going-0123456789abcdef~1:5~"
    assert cache_keys.lineage(cache_keys.key("lineage-test", forged)) is None
    assert cache_keys.lineage(cache_keys.key("lineage-test", f"x{forged}")) is None


def test_an_ended_runs_figures_have_no_lineage(running: Run) -> None:
    assert cache_keys.lineage(cache_keys.run_summary(running)) is not None
    Run.objects.filter(pk=running.pk).update(status=Run.Status.COMPLETED)
    ended = Run.objects.get(pk=running.pk)
    assert cache_keys.lineage(cache_keys.run_summary(ended)) is None


def test_a_miss_while_another_refreshes_takes_the_latest_of_its_lineage(
    held_second: list[int], clean_cache: None
) -> None:
    computed: list[int] = []

    def compute() -> int:
        computed.append(held_second[0])
        return held_second[0]

    first = single_flight.cached(going_key("a"), compute, 60)
    held_second[0] += 1
    with Refreshing(going_key("other")):
        while_refreshing = single_flight.cached(going_key("a"), compute, 60)
        # Nothing kept for this lineage: computed, refreshing or not.
        fresh = single_flight.cached(going_key("b"), compute, 60)
    after = single_flight.cached(going_key("a"), compute, 60)

    assert (first, while_refreshing, fresh, after) == (
        held_second[0] - 1,
        held_second[0] - 1,
        held_second[0],
        held_second[0],
    )
    assert computed == [held_second[0] - 1, held_second[0], held_second[0]]


def test_an_exact_key_never_takes_another_value(clean_cache: None) -> None:
    with Refreshing(going_key("other")):
        assert single_flight.cached("lineage-test:exact", lambda: "own", 60) == "own"


def test_a_going_runs_page_missed_while_another_refreshes_is_its_latest_rendering(
    alice_client: Client, running: Run, held_second: list[int], clean_cache: None
) -> None:
    """Before, the reader rendered the page again, whatever else the process
    was computing: at the start of each second, every going page and figure
    at once, each holding a thread."""
    path = f"/runs/{running.pk}/"
    first = alice_client.get(path).content.decode()
    store_outcomes(Run.objects.get(pk=running.pk), [PASSED] * 2, offset=5)
    held_second[0] += 1

    # The comparison of the run with itself: a going value no run page reads.
    with Refreshing(cache_keys.comparison((running, running))):
        while_refreshing = alice_client.get(path).content.decode()
    refreshed = alice_client.get(path).content.decode()

    def shown(page: str) -> int:
        return page.split('id="results"', 1)[1].count("data-result-id=")

    assert shown(first) == shown(while_refreshing) == 5
    assert shown(refreshed) == 7

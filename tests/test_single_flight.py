"""Concurrent misses of one cached value: one computation, the others wait.

Counted, not timed: each computation below holds until the other readers are
waiting for it (``single_flight.waiting``), so every reader has missed the
cache before the first computation ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.analysis import summary
from runs.models import Run
from runs.records import cache_keys, page_state, single_flight
from tests.analysis import test_summary_running
from tests.factories import store_outcomes

READERS = 6
KEY = "single-flight-test"
PASSED = test_summary_running.PASSED
# A run still going, 5 of its 20 results stored.
running = test_summary_running.running


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Wait on state; the bound only keeps a failure from hanging the suite."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.002)


def in_threads(count: int, read: Callable[[], Any]) -> list[Any]:
    answers: list[Any] = []
    threads = [
        threading.Thread(target=lambda: answers.append(read())) for _ in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def held_until_the_others_wait(
    key: str, value: Callable[[], Any], computed: list[int]
) -> Callable[..., Any]:
    """A computation, counted, that ends once READERS - 1 others wait for it."""

    def compute(*args: Any, **kwargs: Any) -> Any:
        computed.append(1)
        wait_for(
            lambda: single_flight.waiting(key) == READERS - 1, "the others waiting"
        )
        return value()

    return compute


@pytest.mark.parametrize(
    ("computed_name", "cached", "key_of"),
    [
        ("run_summary", summary.run_summary_cached, cache_keys.run_summary),
        (
            "run_scorer_summaries",
            summary.run_scorer_summaries_cached,
            cache_keys.run_scorers,
        ),
    ],
    ids=["summary", "scorer figures"],
)
def test_concurrent_readers_of_a_running_runs_figures_compute_them_once(
    running: Run,
    held_second: list[int],
    monkeypatch: pytest.MonkeyPatch,
    computed_name: str,
    cached: Callable[..., Any],
    key_of: Callable[[Run], str],
) -> None:
    # The going run's key names the second: held, so that every reader
    # misses the key read here, whenever a second starts during the test.
    # Read here, on the test's database connection; the readers' threads
    # then only count and wait.
    figures = getattr(summary, computed_name)(run=running)
    key = key_of(running)
    cache.delete(key)
    computed: list[int] = []
    counted = held_until_the_others_wait(key, lambda: figures, computed)
    monkeypatch.setattr(summary, computed_name, counted)

    answers = in_threads(READERS, lambda: cached(run=running))

    assert computed == [1]
    assert answers == [figures] * READERS
    # Each reader has its own copy, as from the cache.
    assert len({id(answer) for answer in answers}) == READERS
    assert single_flight.waiting(key) == 0


def test_a_computation_nobody_waits_for_is_not_copied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy is for followers: an uncontended miss (most of them) makes
    none."""
    copies: list[object] = []
    monkeypatch.setattr(
        single_flight.pickle, "dumps", lambda value, *_: copies.append(value)
    )

    assert single_flight.shared(KEY, lambda: {"figures": 1}) == {"figures": 1}
    assert copies == []


def test_a_failed_computation_hands_no_error_and_the_others_compute() -> None:
    cache.delete(KEY)
    computed: list[int] = []
    first = threading.Event()

    def compute() -> str:
        computed.append(1)
        if len(computed) == 1:
            first.set()
            wait_for(lambda: single_flight.waiting(KEY) == 1, "the other waiting")
            raise ValueError("no figures")
        return "figures"

    failures: list[Exception] = []

    def leader() -> None:
        try:
            single_flight.cached(KEY, compute, 60)
        except ValueError as exc:
            failures.append(exc)

    thread = threading.Thread(target=leader)
    thread.start()
    first.wait(60)
    answer = single_flight.cached(KEY, compute, 60)
    thread.join(60)

    assert [str(failure) for failure in failures] == ["no figures"]
    assert answer == "figures"
    assert computed == [1, 1]
    assert cache.get(KEY) == "figures"
    cache.delete(KEY)


def test_a_follower_waits_a_bounded_time_then_computes_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(single_flight, "WAIT_SECONDS", 0)
    release = threading.Event()
    computed: list[str] = []

    def slow() -> str:
        computed.append("leader")
        release.wait(60)
        return "late"

    thread = threading.Thread(target=lambda: single_flight.shared(KEY, slow))
    thread.start()
    wait_for(lambda: bool(computed), "the leader computing")

    answer = single_flight.shared(KEY, lambda: computed.append("own") or "own")
    release.set()
    thread.join(60)

    assert answer == "own"
    assert computed == ["leader", "own"]


def test_a_leader_that_needs_its_own_key_again_computes_it() -> None:
    def outer() -> str:
        return "outer:" + single_flight.shared(KEY, lambda: "inner")

    assert single_flight.shared(KEY, outer) == "outer:inner"
    assert single_flight.waiting(KEY) == 0


def _results_table(client: Client, run: Run) -> str:
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    return response.content.decode().split('id="results"', 1)[1]


def _one_second(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Hold the clock a going run's keys count by (``cache_keys.going_second``)
    at one second; the returned list's one item is that second, to move."""
    second = [cache_keys.going_second()]
    monkeypatch.setattr(cache_keys, "going_second", lambda: second[0])
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    return second


def test_a_running_runs_page_is_rendered_once_a_second(
    alice_client: Client, running: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = _one_second(monkeypatch)
    first = _results_table(alice_client, running)

    store_outcomes(Run.objects.get(pk=running.pk), [PASSED] * 2, offset=5)
    with CaptureQueriesContext(connection) as again:
        same_second = _results_table(alice_client, running)
    # Now: the next request empties the connection's log.
    read_again = len(again.captured_queries)
    second[0] += 1
    next_second = _results_table(alice_client, running)

    # Within the second the batch stored since is not shown: the page is the
    # one rendering of that second, from the cache. The session's user and
    # the page's key (the run, its scoring passes) are all it reads.
    assert same_second == first
    assert 0 < read_again <= 3
    assert first.count("data-result-id=") == 5
    # The next second shows every result stored.
    assert next_second.count("data-result-id=") == 7


def test_a_running_runs_page_key_moves_with_the_second_not_with_each_batch(
    alice: User, running: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = _one_second(monkeypatch)
    before = page_state.run_page_key(user_id=alice.pk, run_id=running.pk)

    store_outcomes(Run.objects.get(pk=running.pk), [PASSED], offset=5)
    after_a_batch = page_state.run_page_key(user_id=alice.pk, run_id=running.pk)
    second[0] += 1
    next_second = page_state.run_page_key(user_id=alice.pk, run_id=running.pk)

    assert before is not None
    assert after_a_batch == before
    assert next_second != before
    # The key of finished pages alone still leaves a running run out.
    assert page_state.run_page_state(user_id=alice.pk, run_id=running.pk) is None


def test_a_running_runs_page_key_moves_at_once_with_its_status_or_name(
    alice: User, running: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    _one_second(monkeypatch)
    before = page_state.run_page_key(user_id=alice.pk, run_id=running.pk)
    Run.objects.filter(pk=running.pk).update(name="renamed")
    renamed = page_state.run_page_key(user_id=alice.pk, run_id=running.pk)
    Run.objects.filter(pk=running.pk).update(cancel_requested=True)
    cancelling = page_state.run_page_key(user_id=alice.pk, run_id=running.pk)

    assert len({before, renamed, cancelling}) == 3


def test_a_running_runs_figures_are_computed_once_a_second(
    running: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every batch moved a going run's figures' key: each was computed again
    for the next reader, up to four times a second."""
    second = _one_second(monkeypatch)
    computed: list[int] = []
    original = summary.run_summary

    def counted(*, run: Run, **options: Any) -> Any:
        computed.append(run.pk)
        return original(run=run, **options)

    monkeypatch.setattr(summary, "run_summary", counted)
    first = summary.run_summary_cached(run=Run.objects.get(pk=running.pk))
    store_outcomes(Run.objects.get(pk=running.pk), [PASSED] * 2, offset=5)
    same_second = summary.run_summary_cached(run=Run.objects.get(pk=running.pk))
    second[0] += 1
    next_second = summary.run_summary_cached(run=Run.objects.get(pk=running.pk))

    assert len(computed) == 2
    assert same_second == first
    assert next_second != first


def test_an_ended_runs_figures_are_keyed_by_its_exact_results(
    running: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    _one_second(monkeypatch)
    run = Run.objects.get(pk=running.pk)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.COMPLETED, finished_at=timezone.now()
    )
    ended = Run.objects.get(pk=run.pk)
    assert cache_keys.results_version(ended) == ended.results_version
    assert cache_keys.results_version(run) != run.results_version

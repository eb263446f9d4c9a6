"""A going run's scorers' figures from the tallies the writer keeps with each
batch (runs/records/tallies.py): the same as from its score rows, exact after
every batch at any size, and read from the rows again once anything else
rewrites the run's results."""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from runs.analysis.summary import (
    ScorerSummary,
    run_scorer_summaries,
    run_scorer_summaries_cached,
)
from runs.executor import store as executor_store
from runs.executor.store import ResultRecord, ScoreRecord, results_write, run_finish
from runs.models import (
    DEADLINE_ERROR_TYPE,
    Dataset,
    Item,
    Result,
    Run,
    RunStatus,
    Score,
    ScoreTally,
)
from runs.records import cache_keys, tallies
from runs.records.versions import results_changed
from tests.factories import arithmetic_items, echo_run, make_dataset

SCORERS = ["exact_match", "includes"]


@pytest.fixture(autouse=True)
def _batches_counted_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test counts its batches from none: a run's id may be an earlier
    test's (SQLite reuses them), whose batches a process counted."""
    monkeypatch.setattr(tallies, "_batches", Counter())


@pytest.fixture
def big_dataset(project: Any) -> Dataset:
    return make_dataset(project, arithmetic_items(40), name="tallied")


def going_run(dataset: Dataset, **options: Any) -> Run:
    run = echo_run(dataset, scorers=SCORERS, options=options)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def record(item: Item, kind: int, epoch: int = 0) -> ResultRecord:
    """A result of one of nine kinds: answers scored every way a scorer can
    score (values between 0 and 1, errors, skips, judge tokens), failed
    calls, and results a stop cut short."""
    now = timezone.now()
    base = ResultRecord(
        item_id=item.pk,
        item_index=item.index,
        epoch=epoch,
        status=Result.Status.SUCCEEDED,
        output=f"answer {item.index}",
        attempts=[{"number": 1, "outcome": "ok"}],
        started_at=now,
        finished_at=now,
    )
    value = (item.index % 7) / 6
    if kind in (0, 1, 2):
        base.scores = [
            ScoreRecord("exact_match", value, value > 0.5, prompt_tokens=kind),
            ScoreRecord("includes", 1.0 - value, kind == 1, completion_tokens=3),
        ]
    elif kind == 3:  # a scorer that raised, another skipped
        base.scores = [
            ScoreRecord("exact_match", None, None, error="ValueError: boom"),
            ScoreRecord("includes", None, None, reason="skipped", skipped=True),
        ]
    elif kind == 4:  # one scorer only
        base.scores = [ScoreRecord("exact_match", 0.25, False)]
    elif kind == 5:  # the call failed: no score
        base.status, base.output = Result.Status.FAILED, None
        base.error_kind, base.error_type = "server", "HTTPError"
    elif kind == 6:  # a stop cut it short
        base.status, base.output = Result.Status.CANCELLED, None
        base.error_kind, base.error_type = "cancelled", "Cancelled"
    elif kind == 7:  # the run's deadline cut it short
        base.status, base.output = Result.Status.TIMED_OUT, None
        base.error_kind, base.error_type = "timeout", DEADLINE_ERROR_TYPE
    else:  # its own call timed out: a failure, not a stop
        base.status, base.output = Result.Status.TIMED_OUT, None
        base.error_kind, base.error_type = "timeout", "TimeoutError"
    return base


def store(run: Run, indexes: range, epoch: int = 0) -> None:
    items = Item.objects.filter(dataset=run.dataset, index__in=indexes)
    results_write(run.pk, [record(item, item.index % 9, epoch) for item in items])


def from_rows(run: Run) -> list[ScorerSummary]:
    """The figures read from the run's score rows, as without tallies."""
    untallied = Run.objects.get(pk=run.pk)
    untallied.tally_revision = None
    assert not untallied.tallied
    return run_scorer_summaries(run=untallied)


def assert_same(tallied: list[ScorerSummary], rows: list[ScorerSummary]) -> None:
    assert [s.scorer for s in tallied] == [s.scorer for s in rows]
    for got, want in zip(tallied, rows, strict=True):
        for name in ("mean", "low", "high"):
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None) == (b is None), name
            if a is not None:
                assert math.isclose(a, b, rel_tol=1e-12), name
        exact = dataclasses.replace(got, mean=want.mean, low=want.low, high=want.high)
        assert exact == want


def test_a_going_runs_figures_from_its_tallies_are_those_of_its_rows(
    big_dataset: Dataset,
) -> None:
    run = going_run(big_dataset)
    for start in range(0, 36, 9):
        store(run, range(start, start + 9))
    run.refresh_from_db()

    assert run.tallied
    found = tallies.tallied_figures(run)
    assert found is not None
    tallied = run_scorer_summaries(run=run)
    rows = from_rows(run)
    assert_same(tallied, rows)
    (exact_match, includes) = tallied
    # Counted from the records themselves: 36 results, 8 stopped (4 each of
    # a stop and the deadline); 4 of each of the nine kinds.
    assert exact_match.results == 36 and exact_match.stopped == 8
    assert exact_match.errored == 4 and includes.skipped == 4
    assert exact_match.judged == 28 and includes.judged == 24
    assert includes.not_scored == 36 - 16


def test_a_large_going_runs_scorers_follow_every_batch(
    big_dataset: Dataset, held_second: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A going run's figures are kept one second more for each
    # GOING_RESULTS_A_SECOND results (5 s at 100,000): here for each 2, so
    # that these 9 results make a window of 4 s. Its scorers' no longer,
    # being read from its tallies.
    monkeypatch.setattr(cache_keys, "GOING_RESULTS_A_SECOND", 2)
    run = going_run(big_dataset)
    store(run, range(0, 9))
    run.refresh_from_db()
    held_second[0] = 1000
    before = run_scorer_summaries_cached(run=run)

    store(run, range(9, 18))
    run.refresh_from_db()
    after = run_scorer_summaries_cached(run=run)

    assert cache_keys.going_window(run) > 1
    assert tallies.tallied_figures(run) is not None
    assert after[0].results == before[0].results + 9 == 18
    assert_same(after, from_rows(run))


def test_a_rewrite_of_the_results_sends_the_figures_back_to_the_rows(
    big_dataset: Dataset,
) -> None:
    run = going_run(big_dataset)
    store(run, range(0, 18))
    # As the admin's delete does: the rows change, the revision moves.
    Score.objects.filter(result__run=run, passed=True).delete()
    results_changed(run)
    store(run, range(18, 27))
    run.refresh_from_db()

    assert not run.tallied
    assert tallies.tallied_figures(run) is None
    figures = run_scorer_summaries(run=run)
    assert_same(figures, from_rows(run))
    assert (
        figures[0].passed
        == Score.objects.filter(
            result__run=run, scorer="exact_match", passed=True
        ).count()
    )


def test_results_written_otherwise_never_begin_a_tally(
    big_dataset: Dataset,
) -> None:
    # A run whose rows were not all written by the writer (a fixture, rows
    # stored before tallies): its first batch finds a count on its row.
    run = going_run(big_dataset)
    item = Item.objects.get(dataset=big_dataset, index=0)
    now = timezone.now()
    Result.objects.create(
        run=run,
        item=item,
        item_index=0,
        status=Result.Status.SUCCEEDED,
        started_at=now,
        finished_at=now,
    )
    Run.objects.filter(pk=run.pk).update(succeeded=1)
    store(run, range(1, 10))
    run.refresh_from_db()

    assert run.tally_revision is None and not run.tallied
    assert run_scorer_summaries(run=run)[0].results == 10


def test_an_ended_run_and_a_run_of_several_epochs_read_their_rows(
    big_dataset: Dataset,
) -> None:
    several = going_run(big_dataset, epochs=2)
    store(several, range(0, 9), epoch=0)
    store(several, range(0, 9), epoch=1)
    several.refresh_from_db()
    ended = going_run(big_dataset)
    store(ended, range(0, 9))
    Run.objects.filter(pk=ended.pk).update(status=RunStatus.COMPLETED)
    ended.refresh_from_db()

    for run in (several, ended):
        assert run.tally_revision == 0 and not run.tallied
        assert tallies.tallied_figures(run) is None
    # A run of several epochs keeps no tallies it would not read.
    assert not ScoreTally.objects.filter(run=several).exists()


def test_a_batch_stored_after_the_run_ended_begins_no_tallies(
    big_dataset: Dataset,
) -> None:
    # A shard's last results, stored after another ended the run.
    run = going_run(big_dataset)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    store(run, range(0, 9))
    run.refresh_from_db()

    assert run.tally_revision is None
    assert not ScoreTally.objects.filter(run=run).exists()


def test_a_runs_tallies_end_with_it(big_dataset: Dataset) -> None:
    run = going_run(big_dataset)
    store(run, range(0, 18))
    assert ScoreTally.objects.filter(run=run).exists()

    run_finish(run.pk, cancelled=True)
    # Resumed, it reads its rows: its tallies are gone, and never begin again.
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    store(run, range(18, 27))
    run.refresh_from_db()

    assert not ScoreTally.objects.filter(run=run).exists()
    assert run.tally_revision is None and not run.tallied
    assert run_scorer_summaries(run=run)[0].results == 27


def test_a_batch_stored_without_its_tallies_sends_the_figures_to_the_rows(
    big_dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As an executor of an older release would store a batch of a run whose
    # tallies a newer one began: counted on the run's row, with no tallies.
    run = going_run(big_dataset)
    store(run, range(0, 9))
    monkeypatch.setattr(executor_store.tallies, "batch_stored", lambda *_: None)
    store(run, range(9, 18))
    run.refresh_from_db()

    assert run.tallied
    assert tallies.tallied_figures(run) is None
    # They can never add up again: they end, and the run's figures are kept
    # for its window like those of a run that never had any.
    run.refresh_from_db()
    assert run.tally_revision is None and not run.tallied
    assert not ScoreTally.objects.filter(run=run).exists()
    figures = run_scorer_summaries(run=run)
    assert figures[0].results == 18
    assert_same(figures, from_rows(run))


@pytest.mark.parametrize(
    "values",
    [[math.nan, 0.25, 0.75], [0.25, math.nan, 0.75], [math.nan, math.nan]],
    ids=["nan-first", "nan-between", "nan-only"],
)
def test_a_nan_score_is_tallied_as_the_database_keeps_it(
    big_dataset: Dataset, values: list[float]
) -> None:
    # SQLite keeps a NaN as NULL (no value); PostgreSQL keeps it, above
    # every number: the highest value, the lowest only of NaNs alone.
    run = going_run(big_dataset)
    items = Item.objects.filter(dataset=big_dataset).order_by("index")
    now = timezone.now()
    results_write(
        run.pk,
        [
            ResultRecord(
                item_id=item.pk,
                item_index=item.index,
                epoch=0,
                status=Result.Status.SUCCEEDED,
                output="x",
                attempts=[],
                started_at=now,
                finished_at=now,
                scores=[ScoreRecord("exact_match", value, False)],
            )
            for item, value in zip(items, values, strict=False)
        ],
    )
    run.refresh_from_db()

    assert run.tallied
    (got,), (want,) = run_scorer_summaries(run=run)[:1], from_rows(run)[:1]
    for name in ("mean", "low", "high", "scored"):
        a, b = getattr(got, name), getattr(want, name)
        assert a == b or (a != a and b != b) or math.isclose(a, b), name


def test_folded_tallies_keep_the_figures(
    big_dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tallies, "FOLD_EVERY", 3)
    run = going_run(big_dataset)
    for start in range(0, 40, 4):  # 10 batches: folded after the 3rd, 6th, 9th
        store(run, range(start, start + 4))
    run.refresh_from_db()

    # One row per scorer and the results' after the last fold, then one
    # batch's: at most 3 + 3.
    assert ScoreTally.objects.filter(run=run).count() <= 6
    assert tallies.tallied_figures(run) is not None
    assert_same(run_scorer_summaries(run=run), from_rows(run))


@pytest.mark.django_db(transaction=True)
def test_batches_stored_at_once_while_folding_lose_nothing(
    project: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Four executors of one run store their batches at once, folding every
    # other batch: a fold deletes only rows it summed (on PostgreSQL, under
    # the lock of the run's row that every batch takes).
    monkeypatch.setattr(tallies, "FOLD_EVERY", 2)
    dataset = make_dataset(project, arithmetic_items(200), name="together")
    run = going_run(dataset)
    errors: list[BaseException] = []

    def executor(shard: int) -> None:
        try:
            for start in range(shard * 50, shard * 50 + 50, 5):
                store(run, range(start, start + 5))
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=executor, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors, errors
    run.refresh_from_db()
    assert run.processed == 200 and run.tallied
    tallied = run_scorer_summaries(run=run)
    assert tallied[0].results == 200
    assert tallies.tallied_figures(run) is not None
    assert_same(tallied, from_rows(run))

"""A run's scorers' figures, kept as its results are stored.

A going run's progress block shows each scorer's passed / judged, pass rate,
mean, scored and errored. Computed from the run's score rows, that is a pass
over every score so far: seconds at a million results, so a large run's
figures were kept for a window of seconds (``cache_keys.going_window``) and
said to be over fewer results than the run had stored. Instead the one
writer of results (``rows.results_store``) adds, in each batch's
transaction, a ``ScoreTally`` row per scorer of what the batch's scores add,
and one of its results; a run's figures are the sum of its rows, exact at
any size and read in milliseconds.

The sum holds while the run's results are only added to. Whatever rewrites
or deletes them (a retry, a re-score, a review's scores, a trace's steps,
the admin) moves the run's revision (``versions.results_changed``), and its
tallies count only at the revision they began at (``Run.tallied``). Past
it, and once the run has ended, the figures come from the score rows, as
for a run whose tallies never began (``tally_revision`` NULL): they begin
with the first batch stored of a run with nothing stored
(``store.TALLY_BEGINS``), so a run stored before tallies were kept, or
whose results were written otherwise, has none.

Each batch adds rows, and a run stored in small batches would have many:
each process folds a run's rows into one per scorer every ``FOLD_EVERY``
batches it stores of the run, after the batch has added its counts to the
run's row. Every batch's transaction updates that row, and holds its lock to
the end: while a fold runs, no other batch's rows can be committed, so the
fold's read and its delete see the same rows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Max, Min, Sum

from runs.models import DEADLINE_ERROR_TYPE, Result, Run, ScoreTally
from runs.records.plain_rows import insert, table

RESULTS = ""  # the scorer name of a batch's results row
CANCELLED = Result.Status.CANCELLED
TIMED_OUT = Result.Status.TIMED_OUT
FIELDS = (
    "run_id",
    "scorer",
    "results",
    "stopped",
    "rows",
    "scored",
    "passed",
    "errored",
    "skipped",
    "value_sum",
    "low",
    "high",
    "prompt_tokens",
    "completion_tokens",
)
SUMMED = ("results", "stopped", "rows", "scored", "passed", "errored", "skipped")
FOLD_EVERY = 256
# How many runs' batch counts a process keeps (a long-lived worker's).
RUNS_COUNTED = 1024

_batches: Counter[int] = Counter()


def _plus(total: Any, value: Any) -> Any:
    return value if total is None else total if value is None else total + value


def stopped_in_flight(record: Any) -> bool:
    """``STOPPED_IN_FLIGHT`` of a result record, as its row will be."""
    return record.status == CANCELLED or (
        record.status == TIMED_OUT and record.error_type[:200] == DEADLINE_ERROR_TYPE
    )


def tally_rows(run_id: int, records: Iterable[Any]) -> list[tuple[Any, ...]]:
    """The ``ScoreTally`` rows (``FIELDS``) of result records stored together."""
    # SQLite stores a NaN as NULL: no value, as the score row has.
    nan_is_null = connection.vendor == "sqlite"
    results = stopped = 0
    # Per scorer: rows, scored, passed, errored, skipped, value_sum, low,
    # high, prompt_tokens, completion_tokens.
    scorers: dict[str, list[Any]] = {}
    for record in records:
        results += 1
        stopped += stopped_in_flight(record)
        for score in record.scores:
            t = scorers.get(score.scorer)
            if t is None:
                t = scorers[score.scorer] = [
                    0,
                    0,
                    0,
                    0,
                    0,
                    None,
                    None,
                    None,
                    None,
                    None,
                ]
            t[0] += 1
            t[2] += score.passed is True
            t[3] += score.error != ""
            t[4] += score.skipped
            value = score.value
            if value is not None and not (nan_is_null and math.isnan(value)):
                t[1] += 1
                if t[5] is None:
                    t[5] = t[6] = t[7] = value
                else:
                    t[5] += value
                    t[6] = min(t[6], value)
                    t[7] = max(t[7], value)
            if score.prompt_tokens is not None:
                t[8] = _plus(t[8], score.prompt_tokens)
            if score.completion_tokens is not None:
                t[9] = _plus(t[9], score.completion_tokens)
    if not results:
        return []
    return [
        (run_id, RESULTS, results, stopped, 0, 0, 0, 0, 0, *[None] * 5),
        *((run_id, name, 0, 0, *t) for name, t in scorers.items()),
    ]


def tallies_add(run_id: int, records: Iterable[Any]) -> None:
    """Add the tally of result records just inserted, in their transaction."""
    rows = tally_rows(run_id, records)
    if rows:
        insert(table(ScoreTally, FIELDS), rows)


def _sums(run_id: int) -> list[Mapping[str, Any]]:
    return list(
        ScoreTally.objects.filter(run_id=run_id)
        .values("scorer")
        .annotate(
            tallies=Count("id"),
            last=Max("id"),
            **{name: Sum(name) for name in SUMMED},
            value_sum=Sum("value_sum"),
            low=Min("low"),
            high=Max("high"),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
        )
        .order_by()
    )


def batch_stored(run_id: int) -> None:
    """A batch of the run was stored (with its counts, in this transaction):
    every ``FOLD_EVERY`` of this process's, its rows are folded."""
    if len(_batches) >= RUNS_COUNTED and run_id not in _batches:
        _batches.clear()
    _batches[run_id] += 1
    if _batches[run_id] % FOLD_EVERY == 0:
        tallies_fold(run_id)


def tallies_fold(run_id: int) -> None:
    """Replace the run's tally rows by one per scorer, their sums. In the
    transaction that added a batch's counts to the run's row (whose lock keeps
    other batches from committing rows meanwhile)."""
    if not connection.in_atomic_block:
        raise RuntimeError("tallies_fold runs in the transaction of a batch's counts")
    sums = [row for row in _sums(run_id) if row["tallies"] > 1]
    if not sums:
        return
    with transaction.atomic():
        for row in sums:
            ScoreTally.objects.filter(
                run_id=run_id, scorer=row["scorer"], pk__lte=row["last"]
            ).delete()
        insert(
            table(ScoreTally, FIELDS),
            [(run_id, *(row[name] for name in FIELDS[1:])) for row in sums],
        )


def tallied_figures(
    run: Run,
) -> tuple[dict[str, dict[str, Any]], int, int] | None:
    """The run's figures per scorer as the summary reads them from its score
    rows (rows, scored, passed, errored, skipped, mean, low, high, tokens),
    with its results and those stopped in flight, from its tallies in one
    read; None when they do not come from its tallies (``Run.tallied``)."""
    if not run.tallied:
        return None
    figures, results, stopped = {}, 0, 0
    for row in _sums(run.pk):
        if row["scorer"] == RESULTS:
            results, stopped = row["results"], row["stopped"]
            continue
        scored = row["scored"]
        mean = (
            row["value_sum"] / scored
            if scored and row["value_sum"] is not None
            else None
        )
        figures[row["scorer"]] = {**row, "mean": mean}
    return figures, results, stopped

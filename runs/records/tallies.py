"""A run's scorers' figures, kept as its results are stored.

A going run's progress block shows each scorer's passed / judged, pass rate,
mean, scored and errored. Computed from the run's score rows, that is a pass
over every score so far: seconds at a million results, so a large run's
figures were kept for a window of seconds (``cache_keys.going_window``) and
said to be over fewer results than the run had stored. Instead the writer of
results (``store.results_write``) adds, in each batch's transaction, a
``ScoreTally`` row per scorer of what the batch's scores add, and one of its
results; a run's figures are the sum of its rows, exact at any size and read
in milliseconds.

The sum holds while the run's results are only added to. A run's tallies
begin with the first batch stored of a run with nothing stored
(``store.TALLY_BEGINS``): a run stored before tallies were kept, or whose
results were written otherwise, has none (``tally_revision`` NULL).
Whatever rewrites or deletes its results (a retry, a re-score, a review's
scores, the admin) moves its revision (``versions.results_changed``), and
its tallies count only at the revision they began at (``Run.tallying``); a
trace's steps move it too, but change no score, and move the tallies' with
it (``scores_kept``). They end with the run (``tallies_end``).
Past them, the figures come from the score rows. So that a writer that
keeps none (an executor of an older release, say) cannot go unseen, a read
of the tallies also reads the counts on the run's row, in the same
statement: they must be the tallies' results, else the tallies end and the
rows are read.

Each batch adds rows, and a run stored in small batches would have many:
each process folds a run's rows into one per scorer every ``FOLD_EVERY``
batches it stores of the run. Tallies are added and folded after the batch
has added its counts to the run's row, whose lock its transaction then holds
to its end: no other batch's tallies are written while a fold runs, so the
fold's read and its delete see the same rows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Max, Min, Subquery, Sum

from runs.models import DEADLINE_ERROR_TYPE, RUN_COUNTS, Result, Run, ScoreTally
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
# What a fold and a read add up; the lowest and highest are kept as such.
SUMMED = [name for name in FIELDS[2:] if name not in ("low", "high")]
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


def _add_nan(t: list[Any]) -> None:
    """A NaN value, as PostgreSQL keeps it: scored, its sum NaN, above every
    number (the highest, never the lowest but of NaNs alone)."""
    t[1] += 1
    t[5] = math.nan
    t[6] = math.nan if t[6] is None else t[6]
    t[7] = math.nan


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
                t = scorers[score.scorer] = [0] * 5 + [None] * 5
            t[0] += 1
            t[2] += score.passed is True
            t[3] += score.error != ""
            t[4] += score.skipped
            value = score.value
            if value is not None and value == value:
                t[1] += 1
                if t[5] is None:
                    t[5] = t[6] = t[7] = value
                else:
                    t[5] += value
                    t[6] = value if t[6] != t[6] else min(t[6], value)
                    t[7] = max(t[7], value) if t[7] == t[7] else t[7]
            elif value is not None and not nan_is_null:
                _add_nan(t)
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


def _sums(run_id: int) -> list[Mapping[str, Any]]:
    """Per scorer, the sums of the run's tallies, how many rows and the
    last; each with the run's processed count, read in the same statement."""
    counted = Run.objects.filter(pk=run_id).values(
        processed=sum((F(name) for name in RUN_COUNTS[2:]), F(RUN_COUNTS[1]))
    )
    return list(
        ScoreTally.objects.filter(run_id=run_id)
        .values("scorer")
        .annotate(
            **{name: Sum(name) for name in SUMMED},
            low=Min("low"),
            high=Max("high"),
            tallies=Count("id"),
            last=Max("id"),
            processed=Subquery(counted),
        )
        .order_by()
    )


def batch_stored(run_id: int, records: list[Any]) -> None:
    """Add the tallies of a batch of the run's results just stored, in the
    transaction that added them to its row's counts, if its tallies count
    (``Run.tallying``); every ``FOLD_EVERY`` of this process's batches of
    the run, its rows are folded."""
    if not connection.in_atomic_block:
        raise RuntimeError("tallies are added in the transaction of a batch's counts")
    run = Run.objects.only("tally_revision", "revision", "options").get(pk=run_id)
    if not run.tallying:
        return
    rows = tally_rows(run_id, records)
    if rows:
        insert(table(ScoreTally, FIELDS), rows)
    if len(_batches) >= RUNS_COUNTED and run_id not in _batches:
        _batches.clear()
    _batches[run_id] += 1
    if _batches[run_id] % FOLD_EVERY == 0:
        tallies_fold(run_id)


def tallies_end(run: Run) -> None:
    """The run has ended: its tallies are deleted, and it keeps none again
    (``tally_revision`` NULL, for its caller to save), a resumed run too."""
    ScoreTally.objects.filter(run_id=run.pk).delete()
    run.tally_revision = None


def tallies_fold(run_id: int) -> None:
    """Replace the run's tally rows by one per scorer, their sums. In the
    transaction that added a batch's counts to the run's row (whose lock keeps
    other batches from committing rows meanwhile)."""
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
    read; None when they do not come from its tallies (``Run.tallied``), or
    do not add up to the counts on its row (a writer kept none)."""
    if not run.tallied:
        return None
    sums = _sums(run.pk)
    if not sums:
        return None if run.processed else ({}, 0, 0)
    figures, results, stopped = {}, 0, 0
    for row in sums:
        if row["scorer"] == RESULTS:
            results, stopped = row["results"], row["stopped"]
            continue
        scored = row["scored"]
        total = row["value_sum"]
        mean = total / scored if scored and total is not None else None
        figures[row["scorer"]] = {**row, "mean": mean}
    if results != sums[0]["processed"]:
        # A batch was counted without its tallies: they can never add up
        # again, and end, so that the run's figures are kept for its window
        # (cache_keys.run_scorers) rather than read from every score at each
        # batch. Unless its revision moved meanwhile (then they ended anyway).
        with transaction.atomic():
            if Run.objects.filter(
                pk=run.pk, tally_revision=run.tally_revision, revision=run.revision
            ).update(tally_revision=None):
                ScoreTally.objects.filter(run_id=run.pk).delete()
        return None
    return figures, results, stopped

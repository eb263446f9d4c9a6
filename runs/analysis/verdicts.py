"""A finished run's verdicts per item, stored with it for comparisons.

Comparing two runs of 100,000 items joins both runs' results and each
scorer's scores (a third of a second on PostgreSQL with only those two runs in
the tables, more as the score table grows with other runs). A finished run's
results change only through what moves its ``results_version``, so when a
single-epoch run ends its verdicts are stored as arrays (``RunVerdicts``): per
item, in item order, each scorer's state and value. Two runs of one dataset
version then pair by intersecting their item ids in memory, whatever else the
database holds. Stale or missing verdicts are computed again and stored on the
next comparison; runs with several epochs, and unfinished runs, are compared
in SQL (``compare/sql.py``).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from django.db import connection

from runs.analysis.stored_arrays import npz_bytes
from runs.analysis.summary import STOPPED_PARAMS, STOPPED_SQL, store_for_run
from runs.models import Result, Run, RunVerdicts, Score

logger = logging.getLogger(__name__)

# Raise when the arrays change meaning: stored ones of another format are
# computed again. 2: STOPPED.
FORMAT = 2
# A scorer's state for one item: STOPPED when the result was stopped in
# flight (no sample, models.STOPPED_IN_FLIGHT), else SKIPPED when its
# condition did not hold; plus PASSED when it passed. An item without a score
# (its call failed) is none of these: not passed, value 0, as everywhere in
# the analysis.
STOPPED = 8
SKIPPED = 4
PASSED = 2

# Scorers whose scores one query joins: SQLite joins at most 64 tables, and
# the comparison's scan joins two a scorer (compare/sql.py).
JOINED_SCORERS = 24

_RESULT = Result._meta.db_table
_SCORE = Score._meta.db_table


@dataclass(frozen=True, slots=True)
class Verdicts:
    items: np.ndarray  # item ids, ascending, one per result (int64)
    scorers: tuple[str, ...]
    states: np.ndarray  # (items, scorers) uint8: STOPPED | SKIPPED | PASSED bits
    values: np.ndarray  # (items, scorers) float64, 0 without a value

    def column(self, scorer: str) -> int:
        return self.scorers.index(scorer)


def _version(run: Run) -> str:
    return f"{FORMAT}:{run.results_version}"


def stores_verdicts(run: Run) -> bool:
    """Single-epoch finished runs: one result per item, verdicts that stay."""
    return run.is_final and run.epochs == 1


def scores_joined_sql(
    results: str, scores: Callable[[str], str], count: int, rest: str
) -> str:
    """A query of a run's results (aliased ``r``; ``results``: their columns)
    with the scores of ``count`` scorers joined, each under its alias (s0,
    s1, ...) and read by ``scores(alias)``; ``rest`` is its WHERE and ORDER BY.
    Its parameters: those of the columns, the scorers' names, those of ``rest``."""
    aliases = [f"s{j}" for j in range(count)]
    selected = "".join(f", {scores(s)}" for s in aliases)
    joins = " ".join(
        f"LEFT JOIN {_SCORE} {s} ON {s}.result_id = r.id AND {s}.scorer = %s"
        for s in aliases
    )
    return f"SELECT {results}{selected} FROM {_RESULT} r {joins} {rest}"


def _verdict_columns(s: str) -> str:
    return (
        f"CASE WHEN {STOPPED_SQL} THEN {STOPPED}"
        f" WHEN COALESCE({s}.skipped, FALSE) THEN {SKIPPED} ELSE 0 END"
        f" + CASE WHEN {s}.passed THEN {PASSED} ELSE 0 END,"
        f" COALESCE({s}.value, 0)"
    )


def _sql(run: Run, count: int) -> str:
    """The query of ``count`` scorers; its parameters are ``_params``."""
    return scores_joined_sql(
        "r.item_id",
        _verdict_columns,
        count,
        f"WHERE r.run_id = {int(run.pk)} ORDER BY r.item_id",
    )


def compute(run: Run) -> Verdicts:
    """The run's verdicts, read from its results and scores.

    A query joins the scores of at most ``JOINED_SCORERS`` scorers (SQLite
    joins at most 64 tables); each gives every result of the run, in item
    order, so their columns line up.
    """
    scorers = tuple(run.scorer_names)
    chunks = [
        scorers[start : start + JOINED_SCORERS]
        for start in range(0, len(scorers), JOINED_SCORERS)
    ] or [()]
    tables = []
    with connection.cursor() as cursor:
        for chunk in chunks:
            params = [*STOPPED_PARAMS * len(chunk), *chunk]
            cursor.execute(_sql(run, len(chunk)), params)
            rows = cursor.fetchall()
            tables.append(
                np.array(rows, dtype=float).reshape(len(rows), 1 + 2 * len(chunk))
            )
    return Verdicts(
        items=tables[0][:, 0].astype(np.int64),
        scorers=scorers,
        states=np.hstack([table[:, 1::2] for table in tables]).astype(np.uint8),
        values=np.hstack([table[:, 2::2] for table in tables]),
    )


def _encode(verdicts: Verdicts) -> bytes:
    return npz_bytes(
        {"items": verdicts.items, "states": verdicts.states, "values": verdicts.values}
    )


def _decode(data: bytes | memoryview, scorers: Sequence[str]) -> Verdicts | None:
    """The stored arrays, or None when they do not fit the scorers given."""
    try:
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as arrays:
            items, states, values = arrays["items"], arrays["states"], arrays["values"]
    except (OSError, ValueError, KeyError):
        return None
    shape = (len(items), len(scorers))
    if states.shape != shape or values.shape != shape:
        return None
    return Verdicts(items, tuple(scorers), states, values)


def stored_verdicts(run: Run) -> Verdicts | None:
    """The run's stored verdicts while current, else None."""
    stored = (
        RunVerdicts.objects.filter(run=run, version=_version(run))
        .values_list("data", "scorers")
        .first()
    )
    if stored is None:
        return None
    verdicts = _decode(*stored)
    if verdicts is not None and list(verdicts.scorers) == run.scorer_names:
        return verdicts
    return None


def store_verdicts(run: Run, verdicts: Verdicts) -> None:
    """Keep ``verdicts``, computed now of ``run``, under its version."""
    store_for_run(
        RunVerdicts,
        run,
        version=_version(run),
        scorers=list(verdicts.scorers),
        data=_encode(verdicts),
    )


def run_verdicts(*, run: Run) -> Verdicts | None:
    """The run's stored verdicts when current, else computed and stored;
    None for runs whose verdicts are not stored (``stores_verdicts``)."""
    if not stores_verdicts(run):
        return None
    verdicts = stored_verdicts(run)
    if verdicts is None:
        verdicts = compute(run)
        store_verdicts(run, verdicts)
    return verdicts


@dataclass(frozen=True, slots=True)
class PairedColumns:
    """One scorer of two runs over their shared items, in item order."""

    # As the single scan's: 8 stopped in either, else 4 skipped in either,
    # + 2 baseline passed, + 1 candidate passed.
    state: np.ndarray
    baseline_values: np.ndarray
    candidate_values: np.ndarray


def paired_columns(
    baseline: Verdicts, candidate: Verdicts, scorers: Sequence[str]
) -> dict[str, PairedColumns]:
    """Each shared scorer's paired states and values, by item."""
    _, b, c = np.intersect1d(
        baseline.items, candidate.items, assume_unique=True, return_indices=True
    )
    paired = {}
    for scorer in scorers:
        bs = baseline.states[b, baseline.column(scorer)].astype(np.int64)
        cs = candidate.states[c, candidate.column(scorer)].astype(np.int64)
        either = bs | cs
        state = (
            np.where((either & STOPPED) > 0, 8, np.where((either & SKIPPED) > 0, 4, 0))
            + np.where((bs & PASSED) > 0, 2, 0)
            + np.where((cs & PASSED) > 0, 1, 0)
        )
        paired[scorer] = PairedColumns(
            state,
            baseline.values[b, baseline.column(scorer)],
            candidate.values[c, candidate.column(scorer)],
        )
    return paired

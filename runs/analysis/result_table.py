"""A finished run's results as columns, stored with it (``RunResultTable``).

A results table of a million rows cannot be filtered, counted and paged in
SQL within a page's time: a verdict lives in the scores, which hold no run,
so a filter on it probes a score for each result of the run, and counting the
matches or reaching the last page walks them all. A finished run's results
change only through what moves its ``results_version`` (a retry, a re-score),
so once it has ended they are read once, in dataset order, into a few arrays:
each result's id, item, item index, epoch, status, error kind and error
signature, and per scorer the marks of its verdict and its failing reason's
signature. A filter is then a mask, its count a sum and a page a slice: only
the rows a page shows are read from the database. Failure clusters are the
counts of the signatures.

Stored when the run ends (``figures.run_figures_store``) and read while
current; a stale or missing table is computed again on its next read. A run
still going, or being re-scored, is read in SQL (``run_result_table`` gives
None).
"""

from __future__ import annotations

import dataclasses
import io
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from django.db import connection

from runs.analysis import verdicts
from runs.analysis.cluster_keys import parse_cluster_key
from runs.analysis.stored_arrays import npz_bytes
from runs.analysis.summary import STOPPED_PARAMS, STOPPED_SQL, store_for_run
from runs.analysis.timings import Timings
from runs.analysis.verdicts import (
    JOINED_SCORERS,
    Verdicts,
    scores_joined_sql,
    stored_verdicts,
    stores_verdicts,
)
from runs.models import ResultStatus, Run, RunResultTable, ScoringPass
from runs.records.collector import collector_paused

# Raise when the arrays change meaning: stored ones of another format are
# computed again.
FORMAT = 1

# A scorer's marks on a result, one bit each, as the results filters define
# them (results/selectors.py): it has a score of that scorer; passed; failed
# (not passed, no error); errored; skipped by its condition.
SCORED = 1
PASSED = 2
FAILED = 4
ERRORED = 8
SKIPPED = 16
# Read at a run's end, not stored: the score has a value.
_VALUED = 32
# What a failing-score cluster holds (records.signatures.FAILING_SCORE): a
# score not passed, or errored.
FAILING = FAILED | ERRORED

# Rows read from the database at a time: memory stays flat however big the run.
CHUNK = 20_000

# Columns kept as differences from the row before: in dataset order they
# mostly grow by a little, fit in a byte or two and compress to almost nothing.
_DELTAS = ("ids", "items", "indexes")
# Text columns, kept as codes into their vocabulary ("" first, code 0).
_TEXTS = ("status", "kind", "error")


# The table read for a run instance (with its version), for as long as the
# instance lives: the request that holds it.
_KEPT: weakref.WeakKeyDictionary[Run, tuple[str, ResultTable | None]] = (
    weakref.WeakKeyDictionary()
)


def _version(run: Run) -> str:
    return f"{FORMAT}:{run.results_version}"


def _codes_dtype(size: int) -> type[np.unsignedinteger[Any]]:
    for dtype in (np.uint8, np.uint16, np.uint32):
        if size <= np.iinfo(dtype).max + 1:
            return dtype
    return np.uint64


class ResultTable:
    """A run's results as arrays in dataset order (item index, epoch), one
    row per result; each column is decoded when first used."""

    def __init__(
        self, arrays: Mapping[str, np.ndarray], scorers: Sequence[str]
    ) -> None:
        self._arrays = arrays
        self._decoded: dict[str, Any] = {}
        self.scorers = tuple(scorers)

    def __len__(self) -> int:
        # The status codes: one byte a row, the smallest column to read.
        return len(self.array("status"))

    def array(self, name: str) -> np.ndarray:
        """A stored column, decoded once."""
        found = self._decoded.get(name)
        if found is None:
            found = self._arrays[name]
            if name in _DELTAS:
                start = self._arrays[f"{name}_start"].astype(np.int64)
                rest = start.sum() + np.cumsum(found, dtype=np.int64)
                found = np.concatenate((start, rest))
            self._decoded[name] = found
        return found

    def vocabulary(self, name: str) -> list[str]:
        """The words of a text column's codes (status, kind, error, reason)."""
        key = f"{name}_vocabulary"
        found = self._decoded.get(key)
        if found is None:
            found = self._decoded[key] = [str(word) for word in self._arrays[key]]
        return found

    @property
    def ids(self) -> np.ndarray:
        """Result ids."""
        return self.array("ids")

    @property
    def items(self) -> np.ndarray:
        """Item ids."""
        return self.array("items")

    @property
    def indexes(self) -> np.ndarray:
        """Item indexes."""
        return self.array("indexes")

    def column(self, scorer: str) -> int:
        return self.scorers.index(scorer)

    # -- masks --------------------------------------------------------------------

    def text_is(self, name: str, word: str) -> np.ndarray:
        """Rows whose status, kind or error (signature) is ``word``."""
        return _code_is(self.array(name), self.vocabulary(name), word)

    def marked(self, scorer: str, bits: int) -> np.ndarray:
        """Rows whose score of ``scorer`` has any of ``bits`` (SCORED, PASSED, ...)."""
        return (self.array("marks")[:, self.column(scorer)] & bits) != 0

    def reason_is(self, scorer: str, signature: str) -> np.ndarray:
        """Rows with a failing score of ``scorer`` of reason ``signature``."""
        column = self.column(scorer)
        reasons = self.array("reason")[:, column]
        found = _code_is(reasons, self.vocabulary("reason"), signature)
        return found & ((self.array("marks")[:, column] & FAILING) != 0)

    def in_cluster(self, key: str) -> np.ndarray:
        """Rows in the cluster ``key`` by signature: an error's, or a scorer's
        failing reason's (``cluster_keys.cluster_filter``)."""
        scorer, signature = parse_cluster_key(key)
        if scorer is None:
            return self.text_is("error", signature)
        if scorer not in self.scorers:
            return np.zeros(len(self), dtype=bool)
        return self.reason_is(scorer, signature)

    # -- clusters -----------------------------------------------------------------

    def error_groups(self) -> dict[str, np.ndarray]:
        """Each error signature's rows, in dataset order."""
        return _groups(self.array("error"), self.vocabulary("error"))

    def reason_groups(self) -> dict[tuple[str, str], np.ndarray]:
        """Each (scorer, reason signature)'s rows, in dataset order."""
        reasons, words = self.array("reason"), self.vocabulary("reason")
        return {
            (scorer, signature): rows
            for column, scorer in enumerate(self.scorers)
            for signature, rows in _groups(reasons[:, column], words).items()
        }


def _code_is(codes: np.ndarray, words: list[str], word: str) -> np.ndarray:
    if word not in words:
        return np.zeros(len(codes), dtype=bool)
    return codes == words.index(word)


def _groups(codes: np.ndarray, words: list[str]) -> dict[str, np.ndarray]:
    """The rows of each code but 0 (""), in order; one sort of those rows."""
    rows = np.flatnonzero(codes)
    if not len(rows):
        return {}
    rows = rows[np.argsort(codes[rows], kind="stable")]
    found, starts = np.unique(codes[rows], return_index=True)
    ends = [*starts[1:], len(rows)]
    return {
        words[int(code)]: rows[start:end]
        for code, start, end in zip(found, starts, ends, strict=True)
    }


# -- computing ---------------------------------------------------------------------


def _state_columns(s: str, *, valued: bool = False) -> str:
    has_value = (
        f" + CASE WHEN {s}.value IS NOT NULL THEN {_VALUED} ELSE 0 END"
        if valued
        else ""
    )
    return (
        f"CASE WHEN {s}.id IS NULL THEN 0 ELSE {SCORED}"
        f" + CASE WHEN {s}.passed THEN {PASSED} ELSE 0 END"
        f" + CASE WHEN {s}.passed = FALSE AND {s}.error = '' THEN {FAILED}"
        " ELSE 0 END"
        f" + CASE WHEN {s}.error <> '' THEN {ERRORED} ELSE 0 END"
        f" + CASE WHEN {s}.skipped THEN {SKIPPED} ELSE 0 END{has_value} END,"
        f" COALESCE({s}.reason_signature, '')"
    )


def _full_columns(s: str) -> str:
    # With the mark of a value (not stored), the value a stored verdict
    # keeps (0 without one).
    return f"{_state_columns(s, valued=True)}, COALESCE({s}.value, 0)"


_RESULT_COLUMNS = (
    "r.id, r.item_id, r.item_index, r.epoch, r.status, r.error_kind, r.error_signature"
)


def _sql(scorers: int, *, full: bool) -> str:
    """The rows of a run and the scores of ``scorers`` scorers, in dataset
    order; ``full``, also whether each result was stopped in flight, its
    latency and time to result, and each score's value, for the verdicts,
    the summary and the charts. Its parameters: ``STOPPED_PARAMS``
    (``full``), the scorers' names, the run's id."""
    full_columns = (
        f", CASE WHEN {STOPPED_SQL} THEN 1 ELSE 0 END,"
        " r.latency_ms, r.time_to_result_ms"
    )
    return scores_joined_sql(
        _RESULT_COLUMNS + (full_columns if full else ""),
        _full_columns if full else _state_columns,
        scorers,
        "WHERE r.run_id = %s ORDER BY r.item_index, r.epoch",
    )  # table names from the models, values as parameters


def _chunks(sql: str, params: list[Any]) -> Iterator[list[tuple[Any, ...]]]:
    # A server-side cursor on PostgreSQL: the rows come a chunk at a time.
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(CHUNK):
            yield rows


class _Vocabulary(dict[str | None, int]):
    """Codes of words in the order first met, "" (and NULL) always 0.

    A word is coded by a dictionary lookup, its code made only the first
    time it is met (``__missing__``): a column of a million rows is coded
    without a Python call per row."""

    def __init__(self) -> None:
        super().__init__({"": 0, None: 0})
        self.found = [""]

    def __missing__(self, word: str | None) -> int:
        code = self[word] = len(self.found)
        self.found.append(word or "")
        return code

    def encode(self, words: Sequence[str | None]) -> np.ndarray:
        return np.fromiter(
            map(self.__getitem__, words), dtype=np.int64, count=len(words)
        )

    def words(self) -> np.ndarray:
        return np.array(self.found, dtype=str)

    def narrow(self, codes: np.ndarray) -> np.ndarray:
        return codes.astype(_codes_dtype(len(self.found)))


@dataclasses.dataclass(frozen=True, slots=True)
class Scan:
    """What one read of a run's results joined with their scores gives: the
    table's arrays (as stored), and read in full (at a run's end), in the
    same rows, whether each result was stopped in flight, each score's value
    (0 without one) and whether it has one; and the succeeded results'
    latencies and times to result."""

    arrays: dict[str, np.ndarray]
    stopped: np.ndarray | None = None  # (rows,) bool
    values: np.ndarray | None = None  # (rows, scorers) float64
    valued: np.ndarray | None = None  # (rows, scorers) bool
    timings: Timings | None = None

    def score_values(self, scorers: Sequence[str]) -> dict[str, np.ndarray]:
        """Each scorer's score values, in dataset order (read in full only)."""
        assert self.values is not None and self.valued is not None
        return {
            name: self.values[self.valued[:, j], j] for j, name in enumerate(scorers)
        }


def compute(run: Run) -> dict[str, np.ndarray]:
    """The run's result table as the arrays stored (``_encode``)."""
    return _scan(run, full=False).arrays


# Rows become arrays: the collector's passes over them find nothing.
@collector_paused()
def _scan(run: Run, *, full: bool) -> Scan:
    scorers = run.scorer_names
    groups = [
        scorers[start : start + JOINED_SCORERS]
        for start in range(0, len(scorers), JOINED_SCORERS)
    ] or [[]]
    # Where the scores' columns start in a row, and how many each scorer has.
    first, width = (10, 3) if full else (7, 2)
    base: dict[str, list[np.ndarray]] = {
        name: [] for name in ("ids", "items", "indexes", "epochs", *_TEXTS)
    }
    texts = {name: _Vocabulary() for name in _TEXTS}
    reasons = _Vocabulary()
    stopped: list[np.ndarray] = []
    latencies: list[np.ndarray] = []
    times: list[np.ndarray] = []
    marks: list[list[np.ndarray]] = []
    reason_codes: list[list[np.ndarray]] = []
    values: list[list[np.ndarray]] = []
    for number, group in enumerate(groups):
        group_marks, group_reasons, group_values = [], [], []
        params = [*(STOPPED_PARAMS if full else ()), *group, run.pk]
        for rows in _chunks(_sql(len(group), full=full), params):
            columns = list(zip(*rows, strict=True))
            if number == 0:
                for name, column in zip(
                    ("ids", "items", "indexes", "epochs"), columns, strict=False
                ):
                    base[name].append(np.array(column, dtype=np.int64))
                for name, column in zip(_TEXTS, columns[4:7], strict=True):
                    base[name].append(texts[name].encode(column))
                if full:
                    stopped.append(np.array(columns[7], dtype=bool))
                    latencies.append(np.array(columns[8], dtype=np.float64))
                    times.append(np.array(columns[9], dtype=np.float64))
            if group:
                group_marks.append(np.array(columns[first::width], dtype=np.uint8).T)
                group_reasons.append(
                    np.stack(
                        [reasons.encode(c) for c in columns[first + 1 :: width]],
                        axis=1,
                    )
                )
                if full:
                    group_values.append(
                        np.array(columns[first + 2 :: width], dtype=float).T
                    )
        marks.append(group_marks)
        reason_codes.append(group_reasons)
        values.append(group_values)
    arrays = {
        name: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        for name, parts in base.items()
    }
    for name in _TEXTS:
        arrays[name] = texts[name].narrow(arrays[name])
        arrays[f"{name}_vocabulary"] = texts[name].words()
    count = len(arrays["ids"])
    marks_read = _columns(marks, groups, count).astype(np.uint8)
    arrays["marks"] = marks_read & ~np.uint8(_VALUED)
    arrays["reason"] = reasons.narrow(_columns(reason_codes, groups, count))
    arrays["reason_vocabulary"] = reasons.words()
    if not full:
        return Scan(arrays)
    succeeded = _code_is(
        arrays["status"], texts["status"].found, ResultStatus.SUCCEEDED.value
    )
    return Scan(
        arrays,
        stopped=np.concatenate([np.zeros(0, dtype=bool), *stopped]),
        values=_columns(values, groups, count).astype(float),
        valued=(marks_read & _VALUED) != 0,
        timings=Timings.of_columns(
            np.concatenate([np.zeros(0), *latencies])[succeeded],
            np.concatenate([np.zeros(0), *times])[succeeded],
        ),
    )


def _verdicts(scan: Scan, scorers: Sequence[str]) -> Verdicts:
    """The run's verdicts (``verdicts.compute``) from the scan's rows: in
    item order, each scorer's state made of the same facts as there."""
    assert scan.stopped is not None and scan.values is not None
    order = np.argsort(scan.arrays["items"], kind="stable")
    marks = scan.arrays["marks"][order]
    stopped = scan.stopped[order][:, None]
    skipped = np.where((marks & SKIPPED) != 0, verdicts.SKIPPED, 0)
    passed = np.where((marks & PASSED) != 0, verdicts.PASSED, 0)
    states = np.where(stopped, verdicts.STOPPED, skipped) + passed
    return Verdicts(
        items=scan.arrays["items"][order].astype(np.int64),
        scorers=tuple(scorers),
        states=states.astype(np.uint8),
        values=scan.values[order].astype(np.float64),
    )


def _columns(
    parts: list[list[np.ndarray]], groups: list[list[str]], rows: int
) -> np.ndarray:
    """One (rows, scorers) array of each group's chunks, side by side."""
    return np.hstack(
        [
            np.vstack(chunks) if chunks else np.zeros((rows, len(group)), np.int64)
            for chunks, group in zip(parts, groups, strict=True)
        ]
    )


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` (integers) in the smallest integer type that holds them."""
    if not len(values):
        return values.astype(np.int8)
    low, high = int(values.min()), int(values.max())
    kinds = (np.uint8, np.uint16, np.uint32) if low >= 0 else ()
    for dtype in (*kinds, np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= low and high <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values.astype(np.int64)


def _encode(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The arrays as stored: the growing columns as their first value and
    the steps from row to row, every integer column in its smallest type."""
    stored = dict(arrays)
    for name in _DELTAS:
        stored[f"{name}_start"] = arrays[name][:1]
        stored[name] = _narrow(np.diff(arrays[name]))
    stored["epochs"] = _narrow(arrays["epochs"])
    return npz_bytes(stored)


def decode(data: bytes, scorers: Sequence[str]) -> ResultTable | None:
    """The stored table (its columns decoded when used), or None when it is
    not one of ``scorers``' scorers."""
    try:
        arrays = np.load(io.BytesIO(data), allow_pickle=False)
        width = arrays["marks"].shape[1]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return ResultTable(arrays, scorers) if width == len(scorers) else None


# -- stored and read ---------------------------------------------------------------


def keeps_table(run: Run) -> bool:
    """A finished run that no re-score is rewriting: its results stay."""
    if not run.is_final:
        return False
    active = (ScoringPass.Status.PENDING, ScoringPass.Status.RUNNING)
    return not ScoringPass.objects.filter(run=run, status__in=active).exists()


def _stored(run: Run) -> bytes | None:
    found = (
        RunResultTable.objects.filter(run=run, version=_version(run))
        .values_list("data", "scorers")
        .first()
    )
    if found is None or found[1] != run.scorer_names:
        return None
    return bytes(found[0])


def _store(run: Run, arrays: Mapping[str, np.ndarray]) -> ResultTable | None:
    """Keep the table's ``arrays``, computed now of ``run``, under its
    version; the table as read back."""
    data = _encode(arrays)
    store_for_run(
        RunResultTable,
        run,
        version=_version(run),
        scorers=run.scorer_names,
        data=data,
    )
    return decode(data, run.scorer_names)


def run_result_table(*, run: Run) -> ResultTable | None:
    """The run's result table when its results stay (``keeps_table``): the
    stored one while current, else computed and stored. None for a run still
    going or being re-scored.

    Kept with ``run`` while it lives (a page may ask again, for each
    cluster), not in this process's cache: a table of a million results is
    megabytes, read from the database in milliseconds.
    """
    version = _version(run)
    kept = _KEPT.get(run)
    if kept is not None and kept[0] == version:
        return kept[1]
    table = None
    if keeps_table(run):
        data = _stored(run)
        table = decode(data, run.scorer_names) if data is not None else None
        if table is None:
            table = _store(run, compute(run))
    _KEPT[run] = (version, table)
    return table


def run_end_scan(run: Run) -> Scan | None:
    """The one read of an ended run's results joined with their scores that
    gives its result table, its verdicts and its scores' values (for its
    charts); None when its table is current already or not kept."""
    if not keeps_table(run):
        return None
    data = _stored(run)
    if data is not None and decode(data, run.scorer_names) is not None:
        return None
    return _scan(run, full=True)


def run_tables_store(*, run: Run, scan: Scan | None = None) -> None:
    """Store what a run keeps of its results when it ends: its result table
    and, for a single-epoch run, its verdicts (``verdicts.run_verdicts``).

    Both are read from the same rows: the run's results joined with their
    scores. ``scan`` (``run_end_scan``) gives both when both are missing;
    one already stored is read back, not computed again.
    """
    wants_verdicts = stores_verdicts(run) and stored_verdicts(run) is None
    if scan is not None:
        if wants_verdicts:
            verdicts.store_verdicts(run, _verdicts(scan, run.scorer_names))
        _KEPT[run] = (_version(run), _store(run, scan.arrays))
        return
    if wants_verdicts:
        verdicts.store_verdicts(run, verdicts.compute(run))
    run_result_table(run=run)

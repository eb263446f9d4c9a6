"""Trajectories of one item in several runs, aligned step by step.

Each trajectory is a sequence of tokens, one a step: a tool call is its
``call_hash`` (the stable hash of its tool and its arguments), a model call
has none, "" (any model call matches any other: they anchor the tool calls
around them). Each run's sequence is aligned with the first run's by
Levenshtein's edit operations (rapidfuzz): steps that are equal share a row,
a step changed in place (a tool called with other arguments, another tool)
shares the row of the step it replaced, and steps one run has and the first
does not get rows of their own, between the first run's. With N runs, every
run is aligned with the first, and the rows are merged on the first run's
steps.

The rows are laid out in arrays (a 5,000-step trajectory in ten runs is
55,000 cells): ``Row`` objects are made only for the rows a page shows.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt
from rapidfuzz.distance import Levenshtein

# A cell where a run has no step.
NO_STEP = -1

Cells = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Row:
    """One row of an alignment: each run's step there (its position in that
    run's trajectory), or None where that run has no step."""

    cells: tuple[int | None, ...]
    same: bool  # every run has a step here, and they are equal


@dataclass(frozen=True, slots=True)
class Pairing:
    """One run aligned with the first: for each of the first run's steps the
    step it pairs with (``NO_STEP``: not in this run), and the steps this run
    has in each gap that has any (before the first run's step i; gap n is
    after the last)."""

    matched: Cells
    inserted: dict[int, range]


def pair(first: Sequence[Hashable], other: Sequence[Hashable]) -> Pairing:
    matched = np.full(len(first), NO_STEP, dtype=np.int64)
    inserted: dict[int, range] = {}

    def insert(gap: int, start: int, stop: int) -> None:
        # Operations follow each other in ``other``: two in one gap (the rest
        # of a replace, then an insert) are one range.
        if start < stop:
            before = inserted.get(gap)
            inserted[gap] = range(start if before is None else before.start, stop)

    for op in Levenshtein.opcodes(first, other):
        if op.tag in ("equal", "replace"):
            common = min(op.src_end - op.src_start, op.dest_end - op.dest_start)
            src = op.src_start
            matched[src : src + common] = np.arange(
                op.dest_start, op.dest_start + common
            )
            # A replace of unequal lengths: the rest were inserted (or deleted).
            insert(src + common, op.dest_start + common, op.dest_end)
        elif op.tag == "insert":
            insert(op.src_start, op.dest_start, op.dest_end)
    return Pairing(matched, inserted)


class Alignment(Sequence[Row]):
    """The rows of an alignment: ``cells[row, run]`` is that run's step in
    the row (``NO_STEP``: none), ``same[row]`` whether they are all equal."""

    __slots__ = ("cells", "same")

    def __init__(self, cells: Cells, same: npt.NDArray[np.bool_]) -> None:
        self.cells = cells
        self.same = same

    def __len__(self) -> int:
        return len(self.same)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self.row(n) for n in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.row(index)

    def __iter__(self) -> Iterator[Row]:
        return (self.row(n) for n in range(len(self)))

    def row(self, n: int) -> Row:
        cells = tuple(None if c == NO_STEP else c for c in self.cells[n].tolist())
        return Row(cells, bool(self.same[n]))

    @property
    def first_divergence(self) -> int | None:
        differs = np.flatnonzero(~self.same)
        return int(differs[0]) if len(differs) else None


def align(sequences: Sequence[Sequence[Hashable]]) -> Alignment:
    """The rows of the alignment of ``sequences`` (the first is the reference)."""
    if not sequences:
        return Alignment(np.empty((0, 0), dtype=np.int64), np.empty(0, dtype=bool))
    # Tokens as small integers: rapidfuzz compares them faster than strings,
    # and numpy compares the rows' steps.
    codes: dict[Hashable, int] = {}
    coded = [[codes.setdefault(t, len(codes)) for t in s] for s in sequences]
    first = coded[0]
    n = len(first)
    pairings = [pair(first, other) for other in coded[1:]]
    # Rows inserted before the first run's step g (g = n: after its last).
    depth = np.zeros(n + 1, dtype=np.int64)
    for pairing in pairings:
        for gap, steps in pairing.inserted.items():
            depth[gap] = max(depth[gap], len(steps))
    gap_start = np.arange(n + 1) + np.concatenate(([0], np.cumsum(depth)[:-1]))
    on_first = gap_start[:n] + depth[:n]  # the row of the first run's step g
    cells = np.full((n + int(depth.sum()), len(sequences)), NO_STEP, dtype=np.int64)
    cells[on_first, 0] = np.arange(n)
    for column, pairing in enumerate(pairings, start=1):
        cells[on_first, column] = pairing.matched
        for gap, steps in pairing.inserted.items():
            start = gap_start[gap]
            cells[start : start + len(steps), column] = np.arange(
                steps.start, steps.stop
            )
    return Alignment(cells, _same(coded, cells))


def _same(coded: list[list[int]], cells: Cells) -> npt.NDArray[np.bool_]:
    """Whether every run has a step in the row, all of one token."""
    present = cells != NO_STEP
    tokens = np.full(cells.shape, NO_STEP, dtype=np.int64)
    for column, sequence in enumerate(coded):
        if sequence:
            mask = present[:, column]
            tokens[mask, column] = np.asarray(sequence)[cells[mask, column]]
    same: npt.NDArray[np.bool_] = present.all(axis=1) & (tokens == tokens[:, :1]).all(
        axis=1
    )
    return same


def first_divergence(rows: Sequence[Row]) -> int | None:
    """The index of the first row where the runs differ; None when they never do."""
    if isinstance(rows, Alignment):
        return rows.first_divergence
    return next((n for n, row in enumerate(rows) if not row.same), None)

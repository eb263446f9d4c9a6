"""Trajectories of one item in several runs, aligned step by step.

Each trajectory is a sequence of tokens, one a step: a tool call is its tool
and its arguments' stable hash (``call_hash``), a model call is "model" (any
model call matches any other: they anchor the tool calls around them). Each
run's sequence is aligned with the first run's by Levenshtein's edit
operations (rapidfuzz): steps that are equal share a row, a step changed in
place (a tool called with other arguments, another tool) shares the row of
the step it replaced, and steps one run has and the first does not get rows
of their own, between the first run's. With N runs, every run is aligned
with the first, and the rows are merged on the first run's steps.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

MODEL_TOKEN = "model"


def step_token(kind: str, name: str, call_hash: str) -> str:
    """What a step is compared by: a tool call's name and arguments' hash."""
    if kind == "model":
        return MODEL_TOKEN
    return f"{name}\x00{call_hash}"


@dataclass(frozen=True, slots=True)
class Row:
    """One row of an alignment: each run's step there (its position in that
    run's trajectory), or None where that run has no step."""

    cells: tuple[int | None, ...]
    same: bool  # every run has a step here, and they are equal


@dataclass(frozen=True, slots=True)
class Pairing:
    """One run aligned with the first: for each of the first run's steps the
    step it pairs with (None: not in this run), and the steps this run has
    in each gap (before the first run's step i; gap n is after the last)."""

    matched: list[int | None]
    inserted: list[list[int]]


def pair(first: Sequence[Hashable], other: Sequence[Hashable]) -> Pairing:
    matched: list[int | None] = [None] * len(first)
    inserted: list[list[int]] = [[] for _ in range(len(first) + 1)]
    for op in Levenshtein.opcodes(list(first), list(other)):
        if op.tag in ("equal", "replace"):
            common = min(op.src_end - op.src_start, op.dest_end - op.dest_start)
            for k in range(common):
                matched[op.src_start + k] = op.dest_start + k
            # A replace of unequal lengths: the rest were inserted (or deleted).
            extra = range(op.dest_start + common, op.dest_end)
            inserted[op.src_start + common].extend(extra)
        elif op.tag == "insert":
            inserted[op.src_start].extend(range(op.dest_start, op.dest_end))
    return Pairing(matched, inserted)


def align(sequences: Sequence[Sequence[str]]) -> list[Row]:
    """The rows of the alignment of ``sequences`` (the first is the reference)."""
    if not sequences:
        return []
    # Tokens as small integers: rapidfuzz compares them faster than strings.
    codes: dict[str, int] = {}
    coded = [[codes.setdefault(t, len(codes)) for t in s] for s in sequences]
    first = coded[0]
    pairings = [pair(first, other) for other in coded[1:]]
    rows: list[Row] = []

    def add(cells: tuple[int | None, ...]) -> None:
        rows.append(Row(cells, _same(coded, cells)))

    for gap in range(len(first) + 1):
        depth = max((len(p.inserted[gap]) for p in pairings), default=0)
        for k in range(depth):
            extra = tuple(
                p.inserted[gap][k] if k < len(p.inserted[gap]) else None
                for p in pairings
            )
            add((None, *extra))
        if gap < len(first):
            add((gap, *(p.matched[gap] for p in pairings)))
    return rows


def _same(coded: list[list[int]], cells: tuple[int | None, ...]) -> bool:
    tokens = set()
    for run, cell in enumerate(cells):
        if cell is None:
            return False
        tokens.add(coded[run][cell])
    return len(tokens) == 1


def first_divergence(rows: Sequence[Row]) -> int | None:
    """The index of the first row where the runs differ; None when they never do."""
    return next((n for n, row in enumerate(rows) if not row.same), None)

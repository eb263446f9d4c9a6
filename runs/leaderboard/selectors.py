"""Reads for ranking runs: the runs asked for and their leaderboard, cached."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from runs.compare.selectors import run_ids_parse
from runs.errors import InvalidInput
from runs.leaderboard import items as board_items
from runs.leaderboard.ranking import ScorerBoard, scorer_board
from runs.models import Run
from runs.records import cache_keys, single_flight
from runs.results.selectors import run_get

CACHE_SECONDS = 600


@dataclass(frozen=True, slots=True)
class Leaderboard:
    runs: list[Run]
    paired_by: str
    scorers: list[ScorerBoard]


def leaderboard_runs(*, user: User, text: str | None) -> list[Run]:
    """The runs of ``1,2,3``, each one the user may see (else NotFound)."""
    ids = run_ids_parse(text, field="runs")
    return [run_get(user=user, run_id=run_id) for run_id in ids]


def leaderboard_scorers(runs: Sequence[Run], scorer: str | None) -> list[str]:
    """The scorers every run has; only ``scorer`` when given (InvalidInput if
    it is not one of them)."""
    shared = board_items.shared_scorers(runs)
    if scorer is None:
        return shared
    if scorer not in shared:
        raise InvalidInput(
            f"must be a scorer of every run ({', '.join(shared) or 'none'}), "
            f"not {scorer!r}",
            field="scorer",
        )
    return [scorer]


def leaderboard_compute(
    runs: Sequence[Run], *, scorer: str | None = None
) -> Leaderboard:
    """Every shared scorer's ranking of the runs (the rules in ``ranking``),
    or only ``scorer``'s."""
    scorers = leaderboard_scorers(runs, scorer)
    paired_by = board_items.leaderboard_pairing(runs)
    found = [board_items.run_items(run, paired_by) for run in runs]
    ids = [int(run.pk) for run in runs]
    boards = []
    for scorer in scorers:
        matrix, numeric = board_items.scorer_matrix(found, scorer)
        boards.append(
            scorer_board(scorer=scorer, runs=ids, matrix=matrix, numeric=numeric)
        )
    return Leaderboard(list(runs), paired_by, boards)


def run_leaderboard(
    *, user: User, runs: str | None, scorer: str | None = None
) -> Leaderboard:
    """The ranking of the runs of ``runs`` (``1,2,3``), kept under the runs'
    ``results_version``."""
    chosen = leaderboard_runs(user=user, text=runs)
    key = cache_keys.leaderboard(tuple(chosen), scorer)

    def compute() -> tuple[Any, ...]:
        board = leaderboard_compute(chosen, scorer=scorer)
        return board.paired_by, board.scorers

    paired_by, boards = single_flight.cached(key, compute, CACHE_SECONDS)
    return Leaderboard(chosen, paired_by, boards)

"""Where a baseline cluster's results went in a run compared with it: passing,
no longer erring, unscored, missing, or in another cluster.

Two finished runs pair their result tables (``result_table.py``) by item and
epoch in memory; otherwise the run's results are matched to the baseline's in
SQL, one ``EXISTS`` per result.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from django.db.models import Count, Exists, OuterRef, Subquery

from runs.analysis.cluster_keys import (
    cluster_filter,
    parse_cluster_key,
    score_cluster_key,
)
from runs.analysis.result_table import PASSED as PASSED_MARK
from runs.analysis.result_table import ResultTable, run_result_table
from runs.models import Result, Run, Score
from runs.records.signatures import score_pattern

PASSED, NO_ERROR, CLUSTER = "passed", "no error", "cluster"
NOT_SCORED, MISSING = "not scored", "missing"

Destinations = Counter[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Move:
    """Where some of a baseline cluster's results are in the run compared:
    ``to`` PASSED, NO_ERROR, NOT_SCORED, MISSING, or CLUSTER ``key``."""

    to: str
    count: int
    key: str = ""
    pattern: str = ""


def _destination(key: str, error_signature: str, signature: str, ok: bool) -> Move:
    """Where a baseline result of the cluster ``key`` is now (count 0)."""
    scorer, _ = parse_cluster_key(key)
    if scorer is not None and signature:
        return Move(CLUSTER, 0, score_cluster_key(scorer, signature))
    if error_signature:
        return Move(CLUSTER, 0, error_signature)
    return Move(NO_ERROR if scorer is None else PASSED if ok else NOT_SCORED, 0)


def _places(table: ResultTable, epochs: int) -> np.ndarray:
    """Each row's (item, epoch) as one number."""
    return table.items * epochs + table.array("epochs")


def _table_destinations(
    table: ResultTable, baseline: ResultTable, key: str
) -> Destinations:
    scorer, _ = parse_cluster_key(key)
    epochs = (
        int(
            max(
                table.array("epochs").max(initial=0),
                baseline.array("epochs").max(initial=0),
            )
        )
        + 1
    )
    there = _places(baseline, epochs)[baseline.in_cluster(key)]
    rows = np.flatnonzero(np.isin(_places(table, epochs), there))
    errors = table.array("error")[rows].astype(np.int64)
    if scorer is not None and scorer in table.scorers:
        column = table.column(scorer)
        reasons = table.array("reason")[rows, column].astype(np.int64)
        ok = (table.array("marks")[rows, column] & PASSED_MARK) != 0
    else:
        reasons = np.zeros(len(rows), dtype=np.int64)
        ok = np.zeros(len(rows), dtype=bool)
    combos, counts = np.unique(
        np.stack([errors, reasons, ok.astype(np.int64)]), axis=1, return_counts=True
    )
    error_words, reason_words = table.vocabulary("error"), table.vocabulary("reason")
    found: Destinations = Counter()
    for (error, reason, passed), count in zip(
        combos.T.tolist(), counts.tolist(), strict=True
    ):
        move = _destination(key, error_words[error], reason_words[reason], bool(passed))
        found[move.to, move.key] += count
    return found


def _sql_destinations(run: Run, baseline: Run, key: str) -> Destinations:
    scorer, _ = parse_cluster_key(key)
    there = Result.objects.filter(
        cluster_filter(key),
        run=baseline,
        item_id=OuterRef("item_id"),
        epoch=OuterRef("epoch"),
    )
    now = Result.objects.filter(Exists(there), run=run)
    score = Score.objects.filter(result=OuterRef("pk"), scorer=scorer or "")
    rows = (
        now.annotate(
            signature=Subquery(score.values("reason_signature")[:1]),
            ok=Exists(score.filter(passed=True)),
        )
        .values("error_signature", "signature", "ok")
        .annotate(count=Count("pk"))
        .order_by()
    )
    found: Destinations = Counter()
    for row in rows:
        signatures = (row["error_signature"], row["signature"] or "")
        move = _destination(key, *signatures, row["ok"])
        found[move.to, move.key] += row["count"]
    return found


def cluster_moves(*, run: Run, baseline: Run, key: str, before: int) -> list[Move]:
    """Where the ``before`` results of the baseline's cluster ``key`` are in
    ``run`` (same item and epoch), biggest first; those still in it left out."""
    table, theirs = run_result_table(run=run), run_result_table(run=baseline)
    if table is not None and theirs is not None:
        counts = _table_destinations(table, theirs, key)
    else:
        counts = _sql_destinations(run, baseline, key)
    missing = before - counts.total()
    del counts[CLUSTER, key]  # still in it
    if missing > 0:
        counts[MISSING, ""] = missing
    moves = [Move(to, count, other) for (to, other), count in counts.items()]
    return sorted(moves, key=lambda move: (-move.count, move.to, move.key))


def cluster_pattern(run: Run, key: str) -> str:
    """The pattern of the run's cluster ``key`` (read from one of its rows)."""
    scorer, signature = parse_cluster_key(key)
    if scorer is None:
        found = Result.objects.filter(run=run, error_signature=signature)
        return found.values_list("error_pattern", flat=True).first() or ""
    scores = Score.objects.filter(scorer=scorer, reason_signature=signature)
    table = run_result_table(run=run)
    if table is not None:
        # Its first row's score, by id: no walk over the run's scores.
        first = np.flatnonzero(table.in_cluster(key))[:1]
        scores = scores.filter(result_id__in=table.ids[first].tolist())
    else:
        scores = scores.filter(result__run=run)
    row = scores.values("reason", "error").first()
    return score_pattern(reason=row["reason"], error=row["error"]) if row else ""

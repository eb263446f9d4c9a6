"""How two runs' items pair, and the paired tables and differences of a scorer.

Runs are paired item by item: by item when they share a dataset version, by
external id across versions of one dataset (same project, same name). With
one result per item in each run, every scorer of a candidate comes from one
scan (``single_scan``); otherwise every figure of a (candidate, scorer) comes
from one aggregate query (``sql.paired_table_row``) and a bootstrap fetches
the per-item differences, grouped by value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.db.models import Count

from runs.analysis.compare import sql
from runs.analysis.verdicts import JOINED_SCORERS, paired_columns, run_verdicts
from runs.errors import InvalidInput
from runs.models import Result, Run

PAIRED_BY_ITEM = "item"
PAIRED_BY_EXTERNAL_ID = "external_id"
# Differences equal to this many decimals are one value (merged, not rounded).
MERGE_DECIMALS = 9


def comparison_pairing(*, baseline: Run, candidates: Sequence[Run]) -> str:
    """How the runs' items pair: ``item`` or ``external_id``; else InvalidInput."""
    if not candidates:
        raise InvalidInput("give at least one run to compare", field="candidates")
    runs = [baseline, *candidates]
    ids = [run.pk for run in runs]
    if len(set(ids)) != len(ids):
        raise InvalidInput("each run may appear only once", field="candidates")
    if len({run.dataset_id for run in runs}) == 1:
        return PAIRED_BY_ITEM
    for run in candidates:
        if (run.project_id, run.dataset.name) != (
            baseline.project_id,
            baseline.dataset.name,
        ):
            raise InvalidInput(
                f"run {run.pk} is over dataset {run.dataset.name!r}, the baseline "
                f"run {baseline.pk} over {baseline.dataset.name!r}: only runs over "
                "one dataset (any of its versions, in one project) can be paired",
                field="candidates",
            )
    return PAIRED_BY_EXTERNAL_ID


def shared_scorers(baseline: Run, candidate: Run) -> list[str]:
    theirs = set(candidate.scorer_names)
    return [name for name in baseline.scorer_names if name in theirs]


def one_result_each(paired_by: str, baseline: Run, candidate: Run) -> bool:
    """Both runs over one dataset version with one epoch: at most one result
    per item in each, so the runs' results pair without grouping."""
    return paired_by == PAIRED_BY_ITEM and all(
        run.epochs == 1 for run in (baseline, candidate)
    )


def sql_pairing(
    paired_by: str, baseline: Run, candidate: Run, scorer: str
) -> sql.Pairing:
    return sql.Pairing(
        baseline=int(baseline.pk),
        candidate=int(candidate.pk),
        scorer=scorer,
        one_each=one_result_each(paired_by, baseline, candidate),
        by_external_id=paired_by == PAIRED_BY_EXTERNAL_ID,
    )


@dataclass(frozen=True, slots=True)
class PairedTable:
    paired: int
    both_passed: int
    regressions: int
    improvements: int
    both_failed: int
    baseline_pass_sum: float
    candidate_pass_sum: float
    baseline_value_sum: float
    candidate_value_sum: float
    split_items: int  # items whose epochs disagree in either run
    graded_scores: int  # scores with a value other than 0 and 1
    baseline_items: int
    candidate_items: int
    skipped: int = 0  # items in both runs, skipped in either: not paired
    # Items in both runs, stopped in flight in either: no sample, not paired.
    stopped: int = 0

    @property
    def unpaired(self) -> int:
        """Items with results in only one of the runs."""
        in_both = self.paired + self.skipped + self.stopped
        return self.baseline_items + self.candidate_items - 2 * in_both


def paired_table(
    *, baseline: Run, candidate: Run, scorer: str, paired_by: str
) -> PairedTable:
    """The paired table of one scorer, in one aggregate query."""
    row = sql.paired_table_row(sql_pairing(paired_by, baseline, candidate, scorer))
    counts = [int(value or 0) for value in row[:5]]
    sums = [float(value or 0) for value in row[5:9]]
    rest = [int(value or 0) for value in row[9:]]
    return PairedTable(*counts, *sums, *rest)


def paired_differences(
    *, baseline: Run, candidate: Run, scorer: str, paired_by: str, column: str
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct per-item differences (candidate - baseline) and their counts.

    ``column`` is ``passes`` (pass fractions) or ``total`` (mean values).
    """
    assert column in ("passes", "total")
    rows = sql.difference_rows(
        sql_pairing(paired_by, baseline, candidate, scorer), column
    )
    values = np.array([float(value) for value, _ in rows], dtype=float)
    counts = np.array([int(count) for _, count in rows], dtype=np.int64)
    return merged_differences(values, counts)


def merged_differences(
    values: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Differences merged when they differ only by floating-point noise.

    A merged value is the mean of the values it merges, so the differences'
    sum (and mean) is kept; nothing is rounded.
    """
    # Differences of means computed in floating point: 0.217 - 0.0 and
    # 0.42 - 0.203 differ in the last bit. Merged, the test draws over the
    # real distinct differences (2,001 instead of 5,219 on 3-decimal scores).
    _, where = np.unique(np.round(values, MERGE_DECIMALS), return_inverse=True)
    merged = np.bincount(where, weights=counts).astype(np.int64)
    sums = np.bincount(where, weights=values * counts)
    return sums / merged, merged


def unpaired_count(baseline: Run, candidates: Sequence[Run], paired_by: str) -> int:
    """Items with a result in some of the runs but not in all of them."""
    runs = [baseline.pk, *(run.pk for run in candidates)]
    key = "item__external_id" if paired_by == PAIRED_BY_EXTERNAL_ID else "item_id"
    return (
        Result.objects.filter(run_id__in=runs)
        .order_by()
        .values(key)
        .annotate(runs=Count("run_id", distinct=True))
        .filter(runs__lt=len(runs))
        .count()
    )


# With one result per item in each run (one dataset version, one epoch), every
# shared scorer of a candidate comes from one scan: the two runs' results
# joined on the item, each scorer's two scores joined once, materialised, then
# grouped per scorer by (baseline passed, candidate passed, difference of
# values). That gives the paired table and the bootstrap's differences alike;
# the groups are few (at most four per distinct difference).


@dataclass(frozen=True, slots=True)
class ScannedScorer:
    """One scorer's paired table and value differences, from the single scan."""

    table: PairedTable
    values: np.ndarray
    counts: np.ndarray


def _graded_count(values: np.ndarray) -> int:
    return int(np.count_nonzero((values != 0) & (values != 1)))


def single_scan(
    *, baseline: Run, candidate: Run, scorers: Sequence[str]
) -> dict[str, ScannedScorer]:
    """Every shared scorer of two single-epoch runs of one dataset version.

    Finished runs pair their stored verdicts (``verdicts.py``) in memory;
    otherwise one query reads, per paired item, each scorer's verdicts and
    values in both runs (a few numbers a row). Either way the tables and the
    differences are counted from those columns with numpy.
    """
    if not scorers:
        return {}
    b, c = run_verdicts(run=baseline), run_verdicts(run=candidate)
    if b is not None and c is not None:
        paired = paired_columns(b, c, scorers)
        return {
            name: _scanned(
                (one.state, one.baseline_values, one.candidate_values),
                baseline_items=len(b.items),
                candidate_items=len(c.items),
            )
            for name, one in paired.items()
        }
    # Each scorer's columns come from one query; a query joins the scores of
    # at most JOINED_SCORERS scorers (SQLite joins at most 64 tables).
    columns: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for start in range(0, len(scorers), JOINED_SCORERS):
        chunk = scorers[start : start + JOINED_SCORERS]
        rows = sql.single_scan_rows(int(baseline.pk), int(candidate.pk), chunk)
        table = np.array(rows, dtype=float).reshape(len(rows), 3 * len(chunk))
        for j, name in enumerate(chunk):
            columns[name] = (
                table[:, 3 * j].astype(np.int64),
                table[:, 3 * j + 1],
                table[:, 3 * j + 2],
            )
    items = dict(
        Result.objects.filter(run_id__in=[baseline.pk, candidate.pk])
        .order_by()
        .values("run_id")
        .annotate(n=Count("*"))
        .values_list("run_id", "n")
    )
    return {
        name: _scanned(
            columns[name],
            baseline_items=int(items.get(baseline.pk, 0)),
            candidate_items=int(items.get(candidate.pk, 0)),
        )
        for name in scorers
    }


def _scanned(
    columns: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    baseline_items: int,
    candidate_items: int,
) -> ScannedScorer:
    """A scorer's paired table and differences from its per-item state (8 when
    stopped in flight in either run, else 4 when skipped in either, + 2 when
    the baseline passed, + 1 when the candidate did) and both runs' values."""
    state, bt, ct = columns
    kept = state < 4
    cut = state >= 8
    state, bt, ct = state[kept], bt[kept], ct[kept]
    b_passed, c_passed = (state & 2) > 0, (state & 1) > 0
    paired = PairedTable(
        int(kept.sum()),
        int(np.count_nonzero(b_passed & c_passed)),
        int(np.count_nonzero(b_passed & ~c_passed)),
        int(np.count_nonzero(~b_passed & c_passed)),
        int(np.count_nonzero(~b_passed & ~c_passed)),
        float(np.count_nonzero(b_passed)),
        float(np.count_nonzero(c_passed)),
        float(bt.sum()),
        float(ct.sum()),
        split_items=0,
        graded_scores=_graded_count(bt) + _graded_count(ct),
        baseline_items=baseline_items,
        candidate_items=candidate_items,
        skipped=int(np.count_nonzero(~kept & ~cut)),
        stopped=int(np.count_nonzero(cut)),
    )
    values, counts = np.unique(ct - bt, return_counts=True)
    return ScannedScorer(paired, *merged_differences(values, counts))

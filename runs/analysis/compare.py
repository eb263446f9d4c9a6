"""Is run B really better than run A: paired tables, exact tests, Holm.

Runs are paired item by item: by item when they share a dataset version, by
external id across versions of one dataset (same project, same name). With one
result per item in each run, every scorer of a candidate comes from one scan
(``single_scan``): the paired results grouped per scorer by both verdicts and
the difference of values, a few rows each. Otherwise every figure of a
(candidate, scorer) comes from one aggregate query: per-item aggregates of
both runs joined on the pairing key, and conditional counts over that join;
a bootstrap then fetches the per-item differences (grouped by value).

Definitions (also stated on the comparison page):

- A result whose target call failed or timed out, or whose score errored,
  counts as not passed, with value 0: it is what the user got.
- A score skipped by its condition (a scorer that runs only when another
  passed or failed) is neither passed nor failed, as in a run's summary: that
  result leaves the item's epochs for that scorer. An item whose every epoch
  is skipped in either run is not a pair for that scorer; it is counted in the
  scorer row's ``skipped``, not in ``paired`` nor in ``unpaired``.
- With several epochs an item's score is its mean over epochs: its pass
  fraction and its mean value. Pass rates are the mean of the items' pass
  fractions (with one epoch: passed items / paired items).
- Pass/fail scorer, one verdict per item (always so with one epoch): McNemar's
  exact test (two-sided binomial test on the discordant pairs) and Newcombe's
  hybrid score interval for the difference of paired proportions (his method
  10: Wilson intervals of both rates combined with the pairs' correlation).
- Items whose epochs disagree, or numeric scorers (values other than 0 and 1):
  the per-item differences (of pass fractions, or of mean values) are compared
  with a paired bootstrap over items: percentile interval and a two-sided test
  of the recentred resamples, fixed seed.
- The four cells count an item as passed when it passed in at least half its
  epochs; with one epoch, when it passed.
- p-values are adjusted with Holm's method across every (candidate, scorer)
  of the comparison; the verdict reads the adjusted p-value at alpha 0.05.
- Minimum detectable effect (80% power, two-sided alpha 0.05, this many
  pairs): McNemar, Connor's (1987) normal approximation with the observed
  discordant rate (at least the effect itself); bootstrap, the normal
  approximation from the standard deviation of the per-item differences.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.cache import cache
from django.db import connection

from runs.analysis.stats import wilson_interval
from runs.analysis.verdicts import JOINED_SCORERS, paired_columns, run_verdicts
from runs.errors import InvalidInput
from runs.models import Item, Result, Run, Score

ALPHA = 0.05
POWER = 0.80
CONFIDENCE = 0.95
# The floor; each resample is a multinomial draw over the distinct
# differences, so the cost grows with resamples x distinct values.
BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 20_211_014
DIFFERENCE_DECIMALS = 9
# Draws per bootstrap chunk (resamples x distinct differences): bounded memory.
BOOTSTRAP_CHUNK_DRAWS = 4_000_000
# Parts of a bootstrap's resamples, each with its own random stream.
BOOTSTRAP_STREAMS = 4
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _bootstrap_pool() -> ThreadPoolExecutor:
    """Threads that draw a bootstrap's parts, one per core (at most the parts)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = min(BOOTSTRAP_STREAMS, os.cpu_count() or 1)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="bootstrap")
        return _pool


CACHE_SECONDS = 600
# Part of every cache key: raised when what is cached changes shape or meaning
# (2: skipped scores are not pairs), so that no entry of before is read back.
CACHE_GENERATION = 2

PAIRED_BY_ITEM = "item"
PAIRED_BY_EXTERNAL_ID = "external_id"

TEST_MCNEMAR = "mcnemar_exact"
TEST_BOOTSTRAP = "paired_bootstrap"
INTERVAL_NEWCOMBE = "newcombe_paired"
INTERVAL_BOOTSTRAP = "bootstrap_percentile"

BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no_significant_difference"

# The per-item table's filters, by the change of the chosen scorer.
CHANGES = ("regressions", "improvements", "both_failed", "output_changed")

_RESULT = Result._meta.db_table
_SCORE = Score._meta.db_table
_ITEM = Item._meta.db_table


@dataclass(frozen=True, slots=True)
class ScorerComparison:
    scorer: str
    candidate: int
    paired: int
    unpaired: int
    skipped: int  # items in both runs whose score is skipped in either
    measure: str  # "pass_rate" or "mean" (numeric scorers): what delta is of
    baseline_pass_rate: float | None
    candidate_pass_rate: float | None
    baseline_mean: float | None
    candidate_mean: float | None
    delta: float | None
    delta_ci: tuple[float, float] | None
    interval: str | None
    both_passed: int
    regressions: int
    improvements: int
    both_failed: int
    test: str | None
    p_value: float | None
    p_value_adjusted: float | None
    verdict: str
    mde: float | None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Comparison:
    baseline: Run
    candidates: list[Run]
    paired_by: str
    unpaired: int
    scorers: list[ScorerComparison]


# -- pairing -----------------------------------------------------------------


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


# -- SQL ------------------------------------------------------------------------
# One pass over the results of both runs, grouped by the pairing key, with
# each run's figures as conditional aggregates: the per-item aggregates of the
# two runs side by side (a join of two grouped scans was about twice as slow).
# Run ids are integers from the database, written into the text; the scorer
# name is a parameter.


def _one_result_each(paired_by: str, baseline: Run, candidate: Run) -> bool:
    """Both runs over one dataset version with one epoch: at most one result
    per item in each, so the runs' results pair without grouping."""
    return paired_by == PAIRED_BY_ITEM and all(
        int(run.options.get("epochs") or 1) == 1 for run in (baseline, candidate)
    )


def _graded(score: str) -> str:
    return (
        f"CASE WHEN {score}.value IS NOT NULL AND {score}.value <> 0"
        f" AND {score}.value <> 1 THEN 1 ELSE 0 END"
    )


def _kept(score: str) -> str:
    """SQL: the score (or its absence: the call failed) counts for the item."""
    return f"NOT COALESCE({score}.skipped, FALSE)"


def _per_item_sql(
    paired_by: str, baseline: Run, candidate: Run, *, locate: bool = False
) -> str:
    """Per-item aggregates of both runs for one scorer (its name as parameter,
    ``_scorer_params``).

    ``bn``/``cn``: results (epochs) of the item in the baseline / candidate
    whose score was not skipped; ``bs``/``cs``: those whose score was skipped;
    ``bp``/``cp``: those that passed; ``bt``/``ct``: sum of values. With
    ``locate``, each run's first result and item, and the dataset position.
    A result without a score of this scorer (its call failed) or whose score
    errored counts as not passed, value 0.
    """
    b, c = int(baseline.pk), int(candidate.pk)
    if _one_result_each(paired_by, baseline, candidate):
        # Only paired items appear; what is unpaired is counted apart.
        return f"""
        SELECT rb.item_id AS k,
          CASE WHEN {_kept("sb")} THEN 1 ELSE 0 END AS bn,
          CASE WHEN {_kept("sb")} THEN 0 ELSE 1 END AS bs,
          CASE WHEN sb.passed THEN 1 ELSE 0 END AS bp,
          COALESCE(sb.value, 0) AS bt,
          CASE WHEN {_kept("sc")} THEN 1 ELSE 0 END AS cn,
          CASE WHEN {_kept("sc")} THEN 0 ELSE 1 END AS cs,
          CASE WHEN sc.passed THEN 1 ELSE 0 END AS cp,
          COALESCE(sc.value, 0) AS ct,
          {_graded("sb")} + {_graded("sc")} AS graded,
          rb.id AS b_result, rc.id AS c_result, rb.item_id AS b_item,
          rc.item_id AS c_item, rb.item_index AS idx
        FROM {_RESULT} rb
        JOIN {_RESULT} rc ON rc.run_id = {c} AND rc.item_id = rb.item_id
        LEFT JOIN {_SCORE} sb ON sb.result_id = rb.id AND sb.scorer = %s
        LEFT JOIN {_SCORE} sc ON sc.result_id = rc.id AND sc.scorer = %s
        WHERE rb.run_id = {b}"""
    by_external_id = paired_by == PAIRED_BY_EXTERNAL_ID
    key = "i.external_id" if by_external_id else "r.item_id"
    join = f"JOIN {_ITEM} i ON i.id = r.item_id" if by_external_id else ""
    kept = _kept("s")
    located = ""
    if locate:
        located = f""",
          MIN(CASE WHEN r.run_id = {b} THEN r.id END) AS b_result,
          MIN(CASE WHEN r.run_id = {c} THEN r.id END) AS c_result,
          MIN(CASE WHEN r.run_id = {b} THEN r.item_id END) AS b_item,
          MIN(CASE WHEN r.run_id = {c} THEN r.item_id END) AS c_item,
          MIN(CASE WHEN r.run_id = {b} THEN r.item_index END) AS idx"""
    return f"""
        SELECT {key} AS k,
          SUM(CASE WHEN r.run_id = {b} AND {kept} THEN 1 ELSE 0 END) AS bn,
          SUM(CASE WHEN r.run_id = {b} AND {kept} THEN 0
              WHEN r.run_id = {b} THEN 1 ELSE 0 END) AS bs,
          SUM(CASE WHEN r.run_id = {b} AND s.passed THEN 1 ELSE 0 END) AS bp,
          SUM(CASE WHEN r.run_id = {b} THEN COALESCE(s.value, 0) ELSE 0 END)
            AS bt,
          SUM(CASE WHEN r.run_id = {c} AND {kept} THEN 1 ELSE 0 END) AS cn,
          SUM(CASE WHEN r.run_id = {c} AND {kept} THEN 0
              WHEN r.run_id = {c} THEN 1 ELSE 0 END) AS cs,
          SUM(CASE WHEN r.run_id = {c} AND s.passed THEN 1 ELSE 0 END) AS cp,
          SUM(CASE WHEN r.run_id = {c} THEN COALESCE(s.value, 0) ELSE 0 END)
            AS ct,
          SUM({_graded("s")}) AS graded{located}
        FROM {_RESULT} r {join}
        LEFT JOIN {_SCORE} s ON s.result_id = r.id AND s.scorer = %s
        WHERE r.run_id IN ({b}, {c})
        GROUP BY {key}"""


def _scorer_params(
    paired_by: str, baseline: Run, candidate: Run, scorer: str
) -> list[str]:
    if _one_result_each(paired_by, baseline, candidate):
        return [scorer, scorer]
    return [scorer]


def _items_of(paired_by: str, baseline: Run, candidate: Run) -> tuple[str, str]:
    """SQL of how many items each run has results for."""
    if _one_result_each(paired_by, baseline, candidate):
        b, c = (
            f"(SELECT COUNT(*) FROM {_RESULT} WHERE run_id = {int(run.pk)})"
            for run in (baseline, candidate)
        )
        return b, c
    return (
        "SUM(CASE WHEN p.bn + p.bs > 0 THEN 1 ELSE 0 END)",
        "SUM(CASE WHEN p.cn + p.cs > 0 THEN 1 ELSE 0 END)",
    )


_PAIRED = "p.bn > 0 AND p.cn > 0"
# In both runs, but skipped in every epoch of either: not a pair.
_SKIPPED = f"p.bn + p.bs > 0 AND p.cn + p.cs > 0 AND NOT ({_PAIRED})"
_B_PASSED = "2 * p.bp >= p.bn"
_C_PASSED = "2 * p.cp >= p.cn"
_CELLS = {
    "both_passed": f"{_B_PASSED} AND {_C_PASSED}",
    "regressions": f"{_B_PASSED} AND NOT ({_C_PASSED})",
    "improvements": f"NOT ({_B_PASSED}) AND {_C_PASSED}",
    "both_failed": f"NOT ({_B_PASSED}) AND NOT ({_C_PASSED})",
}


def _mean(column: str, n: str) -> str:
    return f"CAST(p.{column} AS DOUBLE PRECISION) / p.{n}"


def _when_paired(expression: str) -> str:
    return f"SUM(CASE WHEN {_PAIRED} THEN {expression} ELSE 0 END)"


def _paired_table_sql(paired_by: str, baseline: Run, candidate: Run) -> str:
    baseline_items, candidate_items = _items_of(paired_by, baseline, candidate)
    cells = ",\n".join(
        f"SUM(CASE WHEN {_PAIRED} AND {condition} THEN 1 ELSE 0 END)"
        for condition in _CELLS.values()
    )
    return f"""WITH p AS ({_per_item_sql(paired_by, baseline, candidate)})
        SELECT {_when_paired("1")},
          {cells},
          {_when_paired(_mean("bp", "bn"))}, {_when_paired(_mean("cp", "cn"))},
          {_when_paired(_mean("bt", "bn"))}, {_when_paired(_mean("ct", "cn"))},
          SUM(CASE WHEN {_PAIRED} AND NOT (p.bp IN (0, p.bn) AND p.cp IN (0, p.cn))
              THEN 1 ELSE 0 END),
          {_when_paired("p.graded")},
          {baseline_items}, {candidate_items},
          SUM(CASE WHEN {_SKIPPED} THEN 1 ELSE 0 END)
        FROM p"""


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

    @property
    def unpaired(self) -> int:
        """Items with results in only one of the runs."""
        in_both = self.paired + self.skipped
        return self.baseline_items + self.candidate_items - 2 * in_both


def paired_table(
    *, baseline: Run, candidate: Run, scorer: str, paired_by: str
) -> PairedTable:
    """The paired table of one scorer, in one aggregate query."""
    with connection.cursor() as cursor:
        cursor.execute(
            _paired_table_sql(paired_by, baseline, candidate),
            _scorer_params(paired_by, baseline, candidate, scorer),
        )
        row = cursor.fetchone()
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
    letter = "p" if column == "passes" else "t"
    difference = f"{_mean(f'c{letter}', 'cn')} - {_mean(f'b{letter}', 'bn')}"
    sql = f"""WITH p AS ({_per_item_sql(paired_by, baseline, candidate)})
        SELECT d, COUNT(*) FROM (
          SELECT {difference} AS d FROM p WHERE {_PAIRED}
        ) differences GROUP BY d"""
    with connection.cursor() as cursor:
        cursor.execute(sql, _scorer_params(paired_by, baseline, candidate, scorer))
        rows = cursor.fetchall()
    values = np.array([float(value) for value, _ in rows], dtype=float)
    counts = np.array([int(count) for _, count in rows], dtype=np.int64)
    return _merged(values, counts)


def _merged(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Differences merged when they differ only by floating-point noise."""
    # Differences of means computed in floating point: 0.217 - 0.0 and
    # 0.42 - 0.203 differ in the last bit. Merged, the bootstrap draws over the
    # real distinct differences (2,001 instead of 5,219 on 3-decimal scores).
    distinct, where = np.unique(
        np.round(values, DIFFERENCE_DECIMALS), return_inverse=True
    )
    return distinct, np.bincount(where, weights=counts).astype(np.int64)


# With one result per item in each run (one dataset version, one epoch), every
# shared scorer of a candidate comes from one scan: the two runs' results
# joined on the item, each scorer's two scores joined once, materialised, then
# grouped per scorer by (baseline passed, candidate passed, difference of
# values). That gives the paired table and the bootstrap's differences alike;
# the groups are few (at most four per distinct difference).


def _single_scan_sql(baseline: Run, candidate: Run, count: int) -> str:
    """Per paired item, for each scorer: its state as one number (4 when
    skipped in either run, + 2 when the baseline passed, + 1 when the
    candidate did), then each run's value (0 without one). Three columns a
    scorer: turning rows into Python is most of what reading them costs."""
    b, c = int(baseline.pk), int(candidate.pk)
    columns, joins = [], []
    for j in range(count):
        columns.append(
            f"CASE WHEN {_kept(f'b{j}')} AND {_kept(f'c{j}')} THEN 0 ELSE 4 END"
            f" + CASE WHEN b{j}.passed THEN 2 ELSE 0 END"
            f" + CASE WHEN c{j}.passed THEN 1 ELSE 0 END, "
            f"COALESCE(b{j}.value, 0), COALESCE(c{j}.value, 0)"
        )
        joins.append(
            f"LEFT JOIN {_SCORE} b{j} ON b{j}.result_id = rb.id AND b{j}.scorer = %s "
            f"LEFT JOIN {_SCORE} c{j} ON c{j}.result_id = rc.id AND c{j}.scorer = %s"
        )
    return f"""SELECT {", ".join(columns)}
        FROM {_RESULT} rb
        JOIN {_RESULT} rc ON rc.run_id = {c} AND rc.item_id = rb.item_id
        {" ".join(joins)}
        WHERE rb.run_id = {b}"""


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
    with connection.cursor() as cursor:
        for start in range(0, len(scorers), JOINED_SCORERS):
            chunk = scorers[start : start + JOINED_SCORERS]
            params = [name for name in chunk for _ in range(2)]
            cursor.execute(_single_scan_sql(baseline, candidate, len(chunk)), params)
            rows = cursor.fetchall()
            table = np.array(rows, dtype=float).reshape(len(rows), 3 * len(chunk))
            for j, name in enumerate(chunk):
                columns[name] = (
                    table[:, 3 * j].astype(np.int64),
                    table[:, 3 * j + 1],
                    table[:, 3 * j + 2],
                )
        cursor.execute(
            f"SELECT run_id, COUNT(*) FROM {_RESULT} WHERE run_id IN (%s, %s) "
            "GROUP BY run_id",
            [baseline.pk, candidate.pk],
        )
        items = dict(cursor.fetchall())
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
    """A scorer's paired table and differences from its per-item state (4 when
    skipped in either run, + 2 when the baseline passed, + 1 when the
    candidate did) and both runs' values."""
    state, bt, ct = columns
    kept = state < 4
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
        skipped=int(np.count_nonzero(~kept)),
    )
    values, counts = np.unique(ct - bt, return_counts=True)
    return ScannedScorer(paired, *_merged(values, counts))


# -- statistics -------------------------------------------------------------------


def mcnemar_exact(*, regressions: int, improvements: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test on the discordant pairs."""
    discordant = regressions + improvements
    if discordant == 0:
        return 1.0
    from scipy import stats  # on first use (see below, before _z_sum)

    return float(stats.binomtest(improvements, discordant, 0.5).pvalue)


def newcombe_paired_interval(
    *, both_passed: int, regressions: int, improvements: int, both_failed: int
) -> tuple[float, float]:
    """95% interval of candidate - baseline pass rate (Newcombe 1998, method 10)."""
    a, b, c, d = both_passed, regressions, improvements, both_failed
    n = a + b + c + d
    p_cand, p_base = (a + c) / n, (a + b) / n
    # n > 0: the caller compares no empty table.
    cand = wilson_interval(a + c, n, confidence=CONFIDENCE)
    base = wilson_interval(a + b, n, confidence=CONFIDENCE)
    assert cand is not None and base is not None
    (low_cand, high_cand), (low_base, high_base) = cand, base
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(margins) if margins else 0.0
    below_cand, above_base = p_cand - low_cand, high_base - p_base
    above_cand, below_base = high_cand - p_cand, p_base - low_base
    lower = math.sqrt(
        max(below_cand**2 - 2 * phi * below_cand * above_base + above_base**2, 0)
    )
    upper = math.sqrt(
        max(above_cand**2 - 2 * phi * above_cand * below_base + below_base**2, 0)
    )
    theta = p_cand - p_base
    return max(theta - lower, -1.0), min(theta + upper, 1.0)


@dataclass(frozen=True, slots=True)
class Bootstrap:
    mean: float
    interval: tuple[float, float]
    p_value: float
    sd: float


def paired_bootstrap(
    values: np.ndarray,
    counts: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Bootstrap:
    """Bootstrap over items of the mean paired difference.

    Items are drawn with replacement; with the differences grouped by value, a
    resample is a multinomial draw of how often each value is taken (the same
    distribution as drawing items). The p-value is two-sided, from the
    resamples recentred on zero (Efron and Tibshirani 1993, 16.4).
    """
    n = int(counts.sum())
    mean = float(values @ counts) / n
    sd = math.sqrt(float(((values - mean) ** 2) @ counts) / max(n - 1, 1))
    # Resamples in BOOTSTRAP_STREAMS fixed parts, each from its own stream of
    # the seed: the same figures on any machine, however many threads draw
    # them (numpy draws without the GIL, so the parts run side by side).
    parts = np.array_split(np.arange(resamples), BOOTSTRAP_STREAMS)
    streams = np.random.SeedSequence(seed).spawn(BOOTSTRAP_STREAMS)
    chunk = max(1, BOOTSTRAP_CHUNK_DRAWS // max(len(values), 1))
    means = np.empty(resamples)

    def draw(part: np.ndarray, stream: np.random.SeedSequence) -> None:
        rng = np.random.default_rng(stream)
        for start in range(0, len(part), chunk):
            where = part[start : start + chunk]
            draws = rng.multinomial(n, counts / n, size=len(where))
            means[where] = draws @ values / n

    list(_bootstrap_pool().map(draw, parts, streams))
    low, high = np.quantile(means, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    # A tolerance: sums of the same values in another order differ in the last bit.
    extreme = np.abs(means - mean) >= abs(mean) - 1e-12
    p_value = 1.0 if mean == 0 else float((1 + extreme.sum()) / (resamples + 1))
    return Bootstrap(mean, (float(low), float(high)), min(p_value, 1.0), sd)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# scipy.stats and scipy.optimize are imported by the functions that use them,
# on first use: at the top of this module they cost every process (each
# evalrun, each web server) most of a second of start-up.


def _z_sum() -> float:
    from scipy import stats

    return float(stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER))


def mcnemar_mde(*, paired: int, discordant: int) -> float | None:
    """Smallest difference of pass rates McNemar's test would see (80% power).

    Connor (1987): n d^2 = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2, psi the
    discordant rate, taken as observed but at least d (an effect d needs at
    least that many discordant pairs). None when even d = 1 is out of reach.
    """
    if paired == 0:
        return None
    from scipy import optimize, stats

    z_alpha = float(stats.norm.ppf(1 - ALPHA / 2))
    z_beta = float(stats.norm.ppf(POWER))
    observed = discordant / paired

    def gap(d: float) -> float:
        psi = max(observed, d)
        return (
            paired * d * d
            - (z_alpha * math.sqrt(psi) + z_beta * math.sqrt(max(psi - d * d, 0))) ** 2
        )

    if gap(1.0) < 0:
        return None
    return float(optimize.brentq(gap, 1e-9, 1.0))


def bootstrap_mde(*, paired: int, sd: float) -> float | None:
    """(z_a + z_b) sd / sqrt(n): the normal approximation for a paired mean."""
    if paired < 2 or sd == 0:
        return None
    return _z_sum() * sd / math.sqrt(paired)


# -- the comparison ---------------------------------------------------------------


def _scorer_comparison(
    *, baseline: Run, candidate: Run, scorer: str, paired_by: str
) -> ScorerComparison:
    table = paired_table(
        baseline=baseline, candidate=candidate, scorer=scorer, paired_by=paired_by
    )

    def differences(column: str) -> tuple[np.ndarray, np.ndarray]:
        return paired_differences(
            baseline=baseline,
            candidate=candidate,
            scorer=scorer,
            paired_by=paired_by,
            column=column,
        )

    return _tested(table, differences, scorer=scorer, candidate=candidate)


def _tested(
    table: PairedTable,
    differences: Callable[[str], tuple[np.ndarray, np.ndarray]],
    *,
    scorer: str,
    candidate: Run,
) -> ScorerComparison:
    """One (candidate, scorer) row from its paired table; ``differences(column)``
    gives the per-item differences when a bootstrap needs them."""
    n = table.paired
    numeric = table.graded_scores > 0
    row: dict[str, Any] = {
        "scorer": scorer,
        "candidate": candidate.pk,
        "paired": n,
        "unpaired": table.unpaired,
        "skipped": table.skipped,
        "measure": "mean" if numeric else "pass_rate",
        "both_passed": table.both_passed,
        "regressions": table.regressions,
        "improvements": table.improvements,
        "both_failed": table.both_failed,
        "baseline_pass_rate": table.baseline_pass_sum / n if n else None,
        "candidate_pass_rate": table.candidate_pass_sum / n if n else None,
        "baseline_mean": table.baseline_value_sum / n if n else None,
        "candidate_mean": table.candidate_value_sum / n if n else None,
        "delta": None,
        "delta_ci": None,
        "interval": None,
        "test": None,
        "p_value": None,
        "mde": None,
    }
    if n == 0:
        return ScorerComparison(**row, p_value_adjusted=None, verdict=NO_DIFFERENCE)
    if not numeric and table.split_items == 0:
        row.update(
            delta=row["candidate_pass_rate"] - row["baseline_pass_rate"],
            delta_ci=newcombe_paired_interval(
                both_passed=table.both_passed,
                regressions=table.regressions,
                improvements=table.improvements,
                both_failed=table.both_failed,
            ),
            interval=INTERVAL_NEWCOMBE,
            test=TEST_MCNEMAR,
            p_value=mcnemar_exact(
                regressions=table.regressions, improvements=table.improvements
            ),
            mde=mcnemar_mde(
                paired=n, discordant=table.regressions + table.improvements
            ),
        )
    else:
        values, counts = differences("total" if numeric else "passes")
        boot = paired_bootstrap(values, counts)
        row.update(
            delta=boot.mean,
            delta_ci=boot.interval,
            interval=INTERVAL_BOOTSTRAP,
            test=TEST_BOOTSTRAP,
            p_value=boot.p_value,
            mde=bootstrap_mde(paired=n, sd=boot.sd),
        )
    return ScorerComparison(**row, p_value_adjusted=None, verdict=NO_DIFFERENCE)


def _with_verdicts(rows: list[ScorerComparison]) -> list[ScorerComparison]:
    tested = [i for i, row in enumerate(rows) if row.p_value is not None]
    adjusted = holm_adjust([p for row in rows if (p := row.p_value) is not None])
    out = list(rows)
    for i, p_adjusted in zip(tested, adjusted, strict=True):
        row = rows[i]
        verdict = NO_DIFFERENCE
        if p_adjusted < ALPHA and row.delta:
            verdict = BETTER if row.delta > 0 else WORSE
        values = row.as_dict() | {
            "p_value_adjusted": p_adjusted,
            "verdict": verdict,
            # The effect the test could have seen matters when it saw none.
            "mde": row.mde if verdict == NO_DIFFERENCE else None,
        }
        out[i] = ScorerComparison(**values)
    return out


def compare_runs(*, baseline: Run, candidates: Sequence[Run]) -> Comparison:
    """Every (candidate, shared scorer) against the baseline, Holm-adjusted."""
    paired_by = comparison_pairing(baseline=baseline, candidates=candidates)
    rows = [
        row
        for candidate in candidates
        for row in _candidate_rows(baseline, candidate, paired_by)
    ]
    if len(candidates) == 1 and rows:
        unpaired = rows[0].unpaired  # the same count, from the paired table
    else:
        unpaired = _unpaired(baseline, candidates, paired_by)
    return Comparison(
        baseline=baseline,
        candidates=list(candidates),
        paired_by=paired_by,
        unpaired=unpaired,
        scorers=_with_verdicts(rows),
    )


def _candidate_rows(
    baseline: Run, candidate: Run, paired_by: str
) -> list[ScorerComparison]:
    scorers = shared_scorers(baseline, candidate)
    if not _one_result_each(paired_by, baseline, candidate):
        return [
            _scorer_comparison(
                baseline=baseline,
                candidate=candidate,
                scorer=scorer,
                paired_by=paired_by,
            )
            for scorer in scorers
        ]
    scanned = single_scan(baseline=baseline, candidate=candidate, scorers=scorers)

    def tested(one: ScannedScorer, scorer: str) -> ScorerComparison:
        # One epoch: an item's pass fraction is 0 or 1, so only the values'
        # differences are ever drawn from (numeric scorers).
        return _tested(
            one.table,
            lambda column: (one.values, one.counts),
            scorer=scorer,
            candidate=candidate,
        )

    return [tested(scanned[scorer], scorer) for scorer in scorers]


def _unpaired(baseline: Run, candidates: Sequence[Run], paired_by: str) -> int:
    """Items with a result in some of the runs but not in all of them."""
    by_external_id = paired_by == PAIRED_BY_EXTERNAL_ID
    key = "i.external_id" if by_external_id else "r.item_id"
    join = f"JOIN {_ITEM} i ON i.id = r.item_id" if by_external_id else ""
    runs = [baseline.pk, *(run.pk for run in candidates)]
    marks = ", ".join(["%s"] * len(runs))
    sql = f"""
        SELECT COUNT(*) FROM (
          SELECT {key} AS k FROM {_RESULT} r {join}
          WHERE r.run_id IN ({marks})
          GROUP BY {key}
          HAVING COUNT(DISTINCT r.run_id) < %s
        ) partial"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [*runs, len(runs)])
        return int(cursor.fetchone()[0])


def _cache_key(prefix: str, *parts: str) -> str:
    # Scorer names are free text: hashed, the key suits any cache backend.
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()
    return f"{prefix}:{CACHE_GENERATION}:{digest}"


def compare_runs_cached(*, baseline: Run, candidates: Sequence[Run]) -> Comparison:
    """``compare_runs``, kept under the runs' ``results_version``."""
    key = _cache_key(
        "compare", *(run.results_version for run in (baseline, *candidates))
    )
    cached = cache.get(key)
    if cached is None:
        comparison = compare_runs(baseline=baseline, candidates=candidates)
        cache.set(
            key,
            (comparison.paired_by, comparison.unpaired, comparison.scorers),
            CACHE_SECONDS,
        )
        return comparison
    paired_by, unpaired, rows = cached
    return Comparison(baseline, list(candidates), paired_by, unpaired, rows)


# -- per item -------------------------------------------------------------------


def _change_sql() -> str:
    return " ".join(
        f"WHEN {condition} THEN '{name}'" for name, condition in _CELLS.items()
    )


def _item_filter(change: str | None) -> str:
    if change in _CELLS:
        return f"AND {_CELLS[change]}"
    if change == "output_changed":
        distinct = "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
        return f"AND rb.output {distinct} rc.output"
    if change:
        raise InvalidInput(
            f"must be one of {', '.join(CHANGES)}, not {change!r}", field="change"
        )
    return ""


def _items_from(
    paired_by: str, baseline: Run, candidate: Run, change: str | None
) -> str:
    per_item = _per_item_sql(paired_by, baseline, candidate, locate=True)
    outputs = ""
    if change == "output_changed":
        outputs = f"""JOIN {_RESULT} rb ON rb.id = p.b_result
        JOIN {_RESULT} rc ON rc.id = p.c_result"""
    return f"""WITH p AS ({per_item})
        SELECT {{columns}}
        FROM p {outputs}
        WHERE {_PAIRED} {_item_filter(change)}"""


_ITEM_COLUMNS = (
    "p.k, p.b_item, p.c_item, p.b_result, p.c_result, "
    "p.idx, p.bn, p.bp, p.bt, p.cn, p.cp, p.ct, "
    f"CASE {_change_sql()} END"
)


def item_count(row: ScorerComparison, change: str | None) -> int | None:
    """How many paired items a filter keeps, when the comparison counted it."""
    if not change:
        return row.paired
    return getattr(row, change) if change in _CELLS else None


class ComparisonItems:
    """The paired items of one (candidate, scorer), for a Paginator.

    Counted and sliced in the database; each slice reads the outputs of its
    rows only.
    """

    def __init__(
        self,
        *,
        baseline: Run,
        candidate: Run,
        scorer: str,
        paired_by: str,
        change: str | None = None,
        count: int | None = None,
    ) -> None:
        self.baseline = baseline
        self.candidate = candidate
        self.scorer = scorer
        self.change = change or None
        self._from = _items_from(paired_by, baseline, candidate, self.change)
        self._params = _scorer_params(paired_by, baseline, candidate, scorer)
        # Known already when the comparison counted it (paired, or a cell).
        self._count: int | None = count

    def count(self) -> int:
        """How many paired items match; kept under both runs' results_version."""
        if self._count is None:
            key = _cache_key(
                "compare-items",
                self.baseline.results_version,
                self.candidate.results_version,
                self.scorer,
                self.change or "",
            )
            self._count = cache.get(key)
            if self._count is None:
                with connection.cursor() as cursor:
                    cursor.execute(self._from.format(columns="COUNT(*)"), self._params)
                    self._count = int(cursor.fetchone()[0])
                cache.set(key, self._count, CACHE_SECONDS)
        return self._count

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: slice) -> list[dict[str, Any]]:
        if not isinstance(index, slice):
            raise TypeError("ComparisonItems supports slices only")
        start = index.start or 0
        stop = self.count() if index.stop is None else index.stop
        return list(self.rows(limit=max(stop - start, 0), offset=start))

    def rows(
        self, *, limit: int | None = None, offset: int = 0, chunk: int = 500
    ) -> Iterator[dict[str, Any]]:
        """The matching items in dataset order, fetched ``chunk`` at a time."""
        sql = self._from.format(columns=_ITEM_COLUMNS) + " ORDER BY p.idx, p.k"
        params: list[Any] = list(self._params)
        if limit is not None:
            sql += " LIMIT %s OFFSET %s"
            params += [limit, offset]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            while batch := cursor.fetchmany(chunk):
                yield from self._with_outputs(batch)

    def _with_outputs(self, batch: list[tuple[Any, ...]]) -> Iterator[dict[str, Any]]:
        ids = [row[3] for row in batch] + [row[4] for row in batch]
        outputs = dict(Result.objects.filter(pk__in=ids).values_list("pk", "output"))
        external_ids = dict(
            Item.objects.filter(pk__in=[row[1] for row in batch]).values_list(
                "pk", "external_id"
            )
        )
        for row in batch:
            _key, b_item, c_item, b_result, c_result, index = row[:6]
            external_id = external_ids.get(b_item)
            b_n, b_passes, b_total, c_n, c_passes, c_total, change = row[6:]
            yield {
                "external_id": external_id,
                "index": index,
                "baseline_run": self.baseline.pk,
                "candidate_run": self.candidate.pk,
                "scorer": self.scorer,
                "baseline_item": b_item,
                "candidate_item": c_item,
                "baseline_result": b_result,
                "candidate_result": c_result,
                "baseline_output": outputs.get(b_result),
                "candidate_output": outputs.get(c_result),
                "baseline_epochs": int(b_n),
                "candidate_epochs": int(c_n),
                "baseline_pass_rate": int(b_passes) / int(b_n),
                "candidate_pass_rate": int(c_passes) / int(c_n),
                "baseline_score": float(b_total) / int(b_n),
                "candidate_score": float(c_total) / int(c_n),
                "change": change,
            }


def comparison_item_rows(
    *,
    baseline: Run,
    candidate: Run,
    scorer: str,
    change: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Every paired item of (candidate, scorer), in dataset order, as dicts.

    Keys: external_id, index, baseline_run, candidate_run, scorer,
    baseline_item, candidate_item, baseline_result, candidate_result (the first
    result of each run for the item), baseline_output, candidate_output,
    baseline_epochs, candidate_epochs (epochs whose score of this scorer was
    not skipped), baseline_pass_rate, candidate_pass_rate
    (pass fraction over those epochs), baseline_score, candidate_score (mean value
    over epochs, failures as 0), change (both_passed, regressions,
    improvements or both_failed). ``change`` filters as on the page. The
    per-item figures come from one query (small tuples); outputs, the large
    part, are read 500 rows at a time.
    """
    paired_by = comparison_pairing(baseline=baseline, candidates=[candidate])
    items = ComparisonItems(
        baseline=baseline,
        candidate=candidate,
        scorer=scorer,
        paired_by=paired_by,
        change=change,
    )
    return items.rows()

"""Ranking runs over the items they all share: omnibus tests, pairwise tests
with Holm's adjustment, and ranks shared by runs that are not told apart.

Plain functions over an (items x runs) matrix, one column per run:

- Pass/fail scorers with one verdict per item: Cochran's Q over the 0/1
  matrix (chi-square with runs - 1 degrees of freedom), then McNemar's exact
  test for each pair of runs, the comparison's own test.
- Numeric scorers, or items whose epochs disagree (pass fractions): the
  Friedman test (ranks within each item, ties given their mean rank, the tie
  correction of Friedman 1937 / Conover), then the comparison's paired test
  of numeric differences for each pair of runs.
- The pairwise p-values of one scorer are adjusted with Holm's method across
  that scorer's pairs.
- Rank: 1 + the number of runs significantly better than the run (a pair
  whose Holm-adjusted p-value is below alpha, the other run's figure
  higher). Runs that no run beats share rank 1; a run shares its rank with
  every run of the same count ("1=", "2=").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from runs.analysis import compare
from runs.analysis.stats import wilson_interval

ALPHA = compare.ALPHA
CONFIDENCE = compare.CONFIDENCE
NORMAL_EFFECTIVE_ITEMS = compare.NORMAL_EFFECTIVE_ITEMS

TEST_COCHRAN = "cochrans_q"
TEST_FRIEDMAN = "friedman"
INTERVAL_WILSON = "wilson"
INTERVAL_ITEM_MEANS = "normal_item_means"
RANK_RULE = (
    "rank = 1 + the number of runs significantly better than this one "
    f"(Holm-adjusted pairwise p < {ALPHA} and a higher figure); runs with the "
    "same rank are tied"
)


@dataclass(frozen=True, slots=True)
class Standing:
    run: int
    rank: int
    tied: bool  # another run has the same rank
    figure: float | None  # pass rate, or mean (numeric scorers)
    interval: tuple[float, float] | None
    beaten_by: tuple[int, ...]  # runs significantly better than this one


@dataclass(frozen=True, slots=True)
class PairTest:
    first: int
    second: int
    delta: float  # second's figure minus first's
    test: str
    p_value: float
    p_value_adjusted: float

    @property
    def significant(self) -> bool:
        return self.p_value_adjusted < ALPHA


@dataclass(frozen=True, slots=True)
class ScorerBoard:
    scorer: str
    measure: str  # pass_rate or mean
    items: int  # items every run has a (not skipped) score of this scorer for
    interval: str | None
    omnibus_test: str | None
    statistic: float | None
    p_value: float | None
    pairwise_test: str | None
    standings: list[Standing]
    pairs: list[PairTest]


# scipy.stats is imported by the functions that use it, on first use: at the
# top it would cost every process that composes the API most of a second.


def cochrans_q(matrix: np.ndarray) -> tuple[float, float]:
    """Cochran's Q and its chi-square p-value for a 0/1 (items x runs) matrix.

    Items that passed or failed in every run carry no information and add
    nothing to Q; with no other item, Q is 0 and p 1.
    """
    from scipy import stats

    x = np.asarray(matrix, dtype=np.int64)
    k = x.shape[1]
    columns = x.sum(axis=0)
    rows = x.sum(axis=1)
    total = int(columns.sum())
    denominator = k * total - int((rows * rows).sum())
    if k < 2 or denominator == 0:
        return 0.0, 1.0
    q = (k - 1) * (k * int((columns * columns).sum()) - total * total) / denominator
    return float(q), float(stats.chi2.sf(q, k - 1))


def friedman(matrix: np.ndarray) -> tuple[float, float]:
    """Friedman's chi-square and p-value for an (items x runs) matrix, ties
    corrected (what ``scipy.stats.friedmanchisquare`` computes, without its
    loop over items); 0 and p 1 when every item ties all runs."""
    from scipy import stats

    x = np.asarray(matrix, dtype=float)
    n, k = x.shape
    if k < 2 or n == 0:
        return 0.0, 1.0
    ranks = stats.rankdata(x, axis=1)
    # Tie correction: sum over items of t^3 - t for each group of t ties.
    ordered = np.sort(x, axis=1)
    ties = 0.0
    run = np.ones(n)
    for j in range(1, k):
        same = ordered[:, j] == ordered[:, j - 1]
        ended = ~same
        ties += float(((run**3 - run) * ended).sum())
        run = np.where(same, run + 1, 1.0)
    ties += float((run**3 - run).sum())
    correction = 1.0 - ties / (n * (k**3 - k))
    if correction <= 0:
        return 0.0, 1.0
    sums = ranks.sum(axis=0)
    chi = 12.0 / (n * k * (k + 1)) * float((sums * sums).sum()) - 3 * n * (k + 1)
    chi /= correction
    return float(chi), float(stats.chi2.sf(chi, k - 1))


def _numeric_p(differences: np.ndarray) -> tuple[float, str]:
    """The comparison's paired test of numeric differences, two-sided: its p
    and its name (exact, drawn or normal, as the comparison names it)."""
    # Differences of means differ in the last bits (0.217 - 0.0, 0.42 - 0.203):
    # merged, the test draws over the real distinct values, a few times fewer.
    values, counts = np.unique(np.round(differences, 12), return_counts=True)
    flip = compare.sign_flip_test(values, counts)
    return flip.p_value, compare.SIGN_FLIP_TESTS[flip.method]


def _binary_p(first: np.ndarray, second: np.ndarray) -> float:
    return compare.mcnemar_exact(
        regressions=int(np.count_nonzero(first & ~second)),
        improvements=int(np.count_nonzero(~first & second)),
    )


def pairwise(runs: list[int], matrix: np.ndarray, *, binary: bool) -> list[PairTest]:
    """Every pair of runs tested, Holm-adjusted across the pairs."""
    figures = matrix.mean(axis=0) if len(matrix) else np.zeros(len(runs))
    found: list[tuple[int, int, float, str, float]] = []
    for i, j in combinations(range(len(runs)), 2):
        test = compare.TEST_MCNEMAR if binary else compare.TEST_SIGN_FLIP_EXACT
        if len(matrix) == 0:
            p = 1.0
        elif binary:
            column_i, column_j = matrix[:, i] > 0, matrix[:, j] > 0
            p = _binary_p(column_i, column_j)
        else:
            p, test = _numeric_p(matrix[:, j] - matrix[:, i])
        found.append((i, j, float(figures[j] - figures[i]), test, p))
    adjusted = compare.holm_adjust([p for *_, p in found])
    return [
        PairTest(runs[i], runs[j], delta, test, p, p_adjusted)
        for (i, j, delta, test, p), p_adjusted in zip(found, adjusted, strict=True)
    ]


def standings(
    runs: list[int],
    figures: list[float | None],
    intervals: list[tuple[float, float] | None],
    pairs: list[PairTest],
) -> list[Standing]:
    """Runs by rank, then figure (highest first), then id (the rule above)."""
    beaten: dict[int, list[int]] = {run: [] for run in runs}
    for pair in pairs:
        if pair.significant and pair.delta != 0:
            ahead = pair.delta > 0
            winner, loser = (
                (pair.second, pair.first) if ahead else (pair.first, pair.second)
            )
            beaten[loser].append(winner)
    ranks = {run: 1 + len(beaten[run]) for run in runs}
    counts = {rank: list(ranks.values()).count(rank) for rank in ranks.values()}
    rows = [
        Standing(
            run=run,
            rank=ranks[run],
            tied=counts[ranks[run]] > 1,
            figure=figure,
            interval=interval,
            beaten_by=tuple(sorted(beaten[run])),
        )
        for run, figure, interval in zip(runs, figures, intervals, strict=True)
    ]

    def order(s: Standing) -> tuple[int, float, int]:
        return (s.rank, -(s.figure if s.figure is not None else -math.inf), s.run)

    return sorted(rows, key=order)


def _item_means_interval(column: np.ndarray) -> tuple[float, float] | None:
    """Normal interval of the mean over items (each item one observation)."""
    from scipy import stats

    n = len(column)
    if n < 2:
        return None
    z = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
    half = z * float(column.std(ddof=1)) / math.sqrt(n)
    mean = float(column.mean())
    return (mean - half, mean + half)


def scorer_board(
    *, scorer: str, runs: list[int], matrix: np.ndarray, numeric: bool
) -> ScorerBoard:
    """One scorer's ranking from its (items x runs) matrix: pass fractions, or
    mean values when ``numeric``."""
    n = len(matrix)
    binary = not numeric and bool(np.isin(matrix, (0.0, 1.0)).all())
    figures: list[float | None] = (
        [float(v) for v in matrix.mean(axis=0)] if n else [None] * len(runs)
    )
    if binary:
        passed = matrix.sum(axis=0)
        intervals = [wilson_interval(int(p), n, confidence=CONFIDENCE) for p in passed]
    else:
        intervals = [_item_means_interval(matrix[:, j]) for j in range(len(runs))]
    omnibus: str | None = None
    statistic = p_value = None
    if n and binary and len(runs) >= 2:
        omnibus, (statistic, p_value) = TEST_COCHRAN, cochrans_q(matrix)
    elif n and len(runs) >= 3:
        omnibus, (statistic, p_value) = TEST_FRIEDMAN, friedman(matrix)
    pairs = pairwise(runs, matrix, binary=binary)
    return ScorerBoard(
        scorer=scorer,
        measure="mean" if numeric else "pass_rate",
        items=n,
        interval=(INTERVAL_WILSON if binary else INTERVAL_ITEM_MEANS) if n else None,
        omnibus_test=omnibus,
        statistic=statistic,
        p_value=p_value,
        pairwise_test=",".join(sorted({pair.test for pair in pairs})) or None,
        standings=standings(runs, figures, intervals, pairs),
        pairs=pairs,
    )

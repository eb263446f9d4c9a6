"""The leaderboard's tests against independent references (statsmodels, scipy)
and its rank rule on hand-made tables."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import cochrans_q as reference_q

from runs.leaderboard.ranking import (
    PairTest,
    cochrans_q,
    friedman,
    scorer_board,
    standings,
)


@pytest.mark.parametrize("seed", range(40))
def test_cochrans_q_matches_statsmodels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(3, 60)), int(rng.integers(2, 7))
    rates = rng.uniform(0.1, 0.9, size=k)
    matrix = (rng.random((n, k)) < rates).astype(int)
    expected = reference_q(matrix)
    if np.isnan(expected.statistic):  # every item tied: no information
        assert cochrans_q(matrix) == (0.0, 1.0)
        return
    q, p = cochrans_q(matrix)
    assert q == pytest.approx(expected.statistic, rel=1e-12, abs=1e-12)
    assert p == pytest.approx(expected.pvalue, rel=1e-10, abs=1e-15)


def test_cochrans_q_without_a_discordant_item_is_not_significant() -> None:
    matrix = np.array([[1, 1, 1], [0, 0, 0], [1, 1, 1]])
    assert cochrans_q(matrix) == (0.0, 1.0)


@pytest.mark.parametrize("seed", range(40))
def test_friedman_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(3, 80)), int(rng.integers(3, 7))
    # Few distinct values: many ties within items, which the correction handles.
    levels = int(rng.integers(2, 12))
    matrix = rng.integers(0, levels, size=(n, k)) / (levels - 1)
    matrix[:, 0] += rng.uniform(0, 0.3) * (rng.random(n) < 0.5)
    expected = stats.friedmanchisquare(*matrix.T)
    chi, p = friedman(matrix)
    assert chi == pytest.approx(expected.statistic, rel=1e-10)
    assert p == pytest.approx(expected.pvalue, rel=1e-8, abs=1e-15)


def test_friedman_with_every_item_tied_is_not_significant() -> None:
    matrix = np.tile(np.array([[0.5], [0.2], [0.9]]), (1, 4))
    assert friedman(matrix) == (0.0, 1.0)


def _pair(first: int, second: int, delta: float, p: float) -> PairTest:
    return PairTest(first, second, delta, "mcnemar_exact", p, p)


def test_runs_not_beaten_share_the_first_rank() -> None:
    # A beats C; B is told apart from neither: A and B share rank 1, C is 2nd.
    pairs = [
        _pair(1, 2, -0.05, 0.4),  # B vs A: no difference
        _pair(1, 3, -0.20, 0.001),  # C is worse than A
        _pair(2, 3, -0.15, 0.2),  # C vs B: no difference
    ]
    rows = standings([1, 2, 3], [0.9, 0.85, 0.7], [None] * 3, pairs)
    assert [(s.run, s.rank, s.tied) for s in rows] == [
        (1, 1, True),
        (2, 1, True),
        (3, 2, False),
    ]
    assert rows[2].beaten_by == (1,)


def test_a_run_beaten_by_two_ranks_third_with_its_equals() -> None:
    pairs = [
        _pair(1, 2, -0.01, 0.9),
        _pair(1, 3, -0.3, 0.001),
        _pair(1, 4, -0.31, 0.001),
        _pair(2, 3, -0.29, 0.001),
        _pair(2, 4, -0.30, 0.002),
        _pair(3, 4, -0.01, 0.8),
    ]
    rows = standings([1, 2, 3, 4], [0.9, 0.89, 0.6, 0.59], [None] * 4, pairs)
    assert [(s.run, s.rank, s.tied) for s in rows] == [
        (1, 1, True),
        (2, 1, True),
        (3, 3, True),
        (4, 3, True),
    ]


def test_pass_fail_board_uses_cochran_mcnemar_and_holm() -> None:
    rng = np.random.default_rng(7)
    n = 200
    strong = (rng.random(n) < 0.9).astype(float)
    weak = (rng.random(n) < 0.5).astype(float)
    middle = np.where(rng.random(n) < 0.9, strong, 1 - strong)
    matrix = np.column_stack([weak, strong, middle])
    board = scorer_board(
        scorer="exact_match", runs=[10, 11, 12], matrix=matrix, numeric=False
    )
    assert board.omnibus_test == "cochrans_q"
    assert board.statistic == pytest.approx(reference_q(matrix).statistic)
    assert board.pairwise_test == "mcnemar_exact"
    expected = {}
    for pair in board.pairs:
        i, j = [10, 11, 12].index(pair.first), [10, 11, 12].index(pair.second)
        b = int(((matrix[:, i] == 1) & (matrix[:, j] == 0)).sum())
        c = int(((matrix[:, i] == 0) & (matrix[:, j] == 1)).sum())
        expected[(pair.first, pair.second)] = stats.binomtest(c, b + c).pvalue
        assert pair.p_value == pytest.approx(expected[(pair.first, pair.second)])
    ordered = sorted(expected.values())
    holm = [min(1.0, (3 - r) * p) for r, p in enumerate(ordered)]
    holm = list(np.maximum.accumulate(holm))
    assert sorted(p.p_value_adjusted for p in board.pairs) == pytest.approx(holm)
    assert board.standings[0].run == 11
    assert board.standings[-1].run == 10
    assert board.standings[-1].rank > 1
    low, high = board.standings[0].interval
    wilson = stats.binomtest(int(strong.sum()), n).proportion_ci(method="wilson")
    assert (low, high) == pytest.approx((wilson.low, wilson.high))


def test_numeric_board_uses_friedman() -> None:
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 300)
    matrix = np.column_stack([base, base + 0.2, base + rng.normal(0, 0.01, 300)])
    board = scorer_board(scorer="judge", runs=[1, 2, 3], matrix=matrix, numeric=True)
    assert board.measure == "mean"
    assert board.omnibus_test == "friedman"
    reference = stats.friedmanchisquare(*matrix.T)
    assert board.statistic == pytest.approx(reference.statistic)
    assert board.standings[0].run == 2
    assert board.standings[0].rank == 1 and not board.standings[0].tied

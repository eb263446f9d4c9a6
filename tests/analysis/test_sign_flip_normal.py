"""The sign-flip test on large samples: its normal approximation against
independent references (scipy's binomial distribution, scipy's permutation
test), its false-positive rate, and the Monte Carlo draws' binomial counts.
The full measurements are in bench/sign_flip_normal.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.utils import timezone
from scipy import stats

from runs.analysis import compare
from runs.leaderboard.ranking import scorer_board
from runs.models import Project, Result, Run, Score
from tests.comparisons import finish, make_run
from tests.factories import make_dataset

SIZE = compare.NORMAL_EFFECTIVE_ITEMS
TINY = 1e-6


def _grouped(differences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, counts = np.unique(differences, return_counts=True)
    return values, counts


def _comparable(rng: np.random.Generator, n: int, z: float) -> np.ndarray:
    """Continuous differences of comparable size (effective items close to
    n), shifted so that their sum is about z standard deviations from 0."""
    centred = rng.choice([-1.0, 1.0], n) * rng.uniform(0.5, 0.6, n)
    return centred + (z * math.sqrt(centred @ centred) - centred.sum()) / n


def test_many_items_of_comparable_size_use_the_normal_approximation() -> None:
    differences = np.random.default_rng(1).uniform(-1, 1, 20_000).round(3)
    values, counts = _grouped(differences)

    test = compare.sign_flip_test(values, counts)

    assert compare.effective_items(values, counts) >= SIZE
    assert test.method == "normal"
    assert compare.SIGN_FLIP_TESTS[test.method] == "sign_flip_normal"
    assert not test.exact


def test_a_few_dominant_differences_keep_the_monte_carlo_test() -> None:
    # 20,000 items, but four of them carry nearly all of the sum of squares.
    rng = np.random.default_rng(2)
    differences = np.r_[rng.uniform(-1e-3, 1e-3, 20_000).round(6), 5, -4, 6, 7]
    values, counts = _grouped(differences)

    test = compare.sign_flip_test(values, counts)

    assert compare.effective_items(values, counts) < 10
    assert test.method == "monte_carlo"


@pytest.mark.parametrize("above", [12, 60, 98, 131, 170, 205])
def test_normal_p_of_equal_differences_is_the_binomial_tests(above: int) -> None:
    # Every |d| the same: the sign-flip test is the sign test, exact by scipy.
    n = SIZE + 1
    positive = (n + 1) // 2 + above

    test = compare.sign_flip_test(
        np.array([-0.2, 0.2]), np.array([n - positive, positive])
    )

    assert test.method == "normal"
    reference = stats.binomtest(positive, n, 0.5).pvalue
    assert test.p_value == pytest.approx(reference, rel=0.005, abs=1e-5)


@pytest.mark.parametrize("above", [85, 98, 131, 170])
def test_normal_p_on_a_lattice_broken_by_a_tiny_difference_is_within_its_bound(
    above: int,
) -> None:
    # One tiny difference takes the continuity correction away: the worst
    # case, stated as within 0.0021 of the exact p-value up to p = 0.1.
    n = SIZE
    positive = n // 2 + above
    sums = 2.0 * np.arange(n + 1) - n
    pmf = stats.binom.pmf(np.arange(n + 1), n, 0.5)
    observed = abs(2.0 * positive - n + TINY)
    exact = 0.5 * sum(
        pmf[np.abs(sums + sign * TINY) >= observed - 1e-12].sum() for sign in (1, -1)
    )

    test = compare.sign_flip_test(
        np.array([-1.0, TINY, 1.0]), np.array([n - positive, 1, positive])
    )

    assert test.method == "normal"
    assert exact <= 0.1
    assert abs(test.p_value - exact) <= 0.0021


def _within_draws(p: float, reference: float, resamples: int) -> bool:
    """Within four standard errors of a reference from random sign vectors."""
    error = 4 * math.sqrt(reference * (1 - reference) / resamples) + 1 / resamples
    return abs(p - reference) <= error


def test_normal_p_agrees_with_scipys_permutation_test() -> None:
    differences = _comparable(np.random.default_rng(3), 11_000, 1.96)
    test = compare.sign_flip_test(*_grouped(differences))
    resamples = 2_000

    reference = stats.permutation_test(
        (differences,),
        np.mean,
        permutation_type="samples",
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(4),
    ).pvalue

    assert test.method == "normal"
    assert 0.01 < reference < 0.1
    assert _within_draws(test.p_value, reference, resamples)


def test_normal_p_agrees_with_simulated_sign_vectors_in_the_far_tail() -> None:
    differences = _comparable(np.random.default_rng(7), 11_000, 2.8)
    test = compare.sign_flip_test(*_grouped(differences))
    rng = np.random.default_rng(8)
    resamples, extreme = 20_000, 0
    for _ in range(resamples // 1_000):
        signs = rng.integers(0, 2, (1_000, len(differences)), dtype=np.int8) * 2 - 1
        sums = signs @ differences
        extreme += int(np.count_nonzero(np.abs(sums) >= abs(differences.sum())))
    reference = (extreme + 1) / (resamples + 1)

    assert test.method == "normal"
    assert 0.001 < reference < 0.01
    assert _within_draws(test.p_value, reference, resamples)


@pytest.mark.parametrize("seed", range(4))
def test_the_normal_interval_excludes_zero_exactly_when_p_is_below_alpha(
    seed: int,
) -> None:
    rng = np.random.default_rng(40 + seed)
    differences = _comparable(rng, 11_000, rng.uniform(0, 4)).round(4)
    test = compare.sign_flip_test(*_grouped(differences))
    assert test.method == "normal"

    for alpha in (0.05, 0.01, 0.005, 0.0005):
        interval = test.interval(alpha=alpha)
        assert interval is not None
        low, high = interval
        assert low < test.mean < high
        assert (low > 0 or high < 0) == (test.p_value < alpha)
        # The interval is the test inverted: its bounds are where p = alpha.
        assert test.p_at(low) == pytest.approx(alpha, rel=1e-6)
        assert test.p_at(high) == pytest.approx(alpha, rel=1e-6)


def test_the_normal_tests_false_positive_rate_on_a_lattice_is_nominal() -> None:
    # Exact, by enumeration over scipy's binomial: every |d| the same
    # (continuity corrected) and that lattice broken by one tiny difference
    # (the worst case, stated as at most 5.12%).
    for n in (SIZE, SIZE + 1):
        positive = np.arange(n + 1)
        pmf = stats.binom.pmf(positive, n, 0.5)
        # Beyond 7 standard deviations both p-values are below 1e-11.
        window = np.abs(2 * positive - n) <= 7 * math.sqrt(n)
        for broken in (False, True):
            p = np.zeros(n + 1)
            for k in positive[window].tolist():
                values, counts = np.array([-1.0, 1.0]), np.array([n - k, k])
                if broken:
                    values = np.array([-1.0, TINY, 1.0])
                    counts = np.array([n - k, 1, k])
                p[k] = compare.sign_flip_test(values, counts).p_value
            size = pmf[p < 0.05].sum()
            assert size <= (0.0513 if broken else 0.0500), (n, broken)


def test_the_normal_tests_simulated_false_positive_rate_is_nominal() -> None:
    # Random signs on fixed 3-decimal score differences under "no difference".
    rng = np.random.default_rng(2025)
    sizes = np.abs(rng.beta(2, 2, 29_000).round(3) - rng.beta(2, 2, 29_000).round(3))
    samples = 600
    rejected = 0
    for _ in range(samples):
        signs = rng.integers(0, 2, len(sizes)) * 2 - 1
        test = compare.sign_flip_test(*_grouped(signs * sizes))
        assert test.method == "normal"
        rejected += test.p_value < compare.ALPHA
    # 5% give or take three standard errors of 600 samples (0.9% each).
    assert rejected / samples <= 0.077


def test_drawn_counts_of_kept_signs_are_binomial() -> None:
    # 150,001 items of 1.0 (2,344 random words, the last one partly used) and
    # two of 100.0: too many sign vectors to enumerate, too few effective
    # items for the normal approximation.
    count = 150_001
    test = compare.sign_flip_test(np.array([1.0, 100.0]), np.array([count, 2]))
    assert test.method == "monte_carlo"

    # sums = (2 K1 - count) + 100 (2 K2 - 2), signs = (2 K1 - count) + (2 K2 - 2)
    k2 = np.rint(((test.sums - test.signs) / 99 + 2) / 2)
    k1 = np.rint((test.signs - (2 * k2 - 2) + count) / 2)
    draws = len(test.sums)
    assert set(np.unique(k2).tolist()) <= {0.0, 1.0, 2.0}
    observed = [np.count_nonzero(k2 == k) for k in (0, 1, 2)]
    assert stats.chisquare(observed, np.array([0.25, 0.5, 0.25]) * draws).pvalue > 1e-3
    mean, variance = count / 2, count / 4
    assert abs(k1.mean() - mean) <= 4 * math.sqrt(variance / draws)
    assert k1.var(ddof=1) == pytest.approx(variance, rel=0.15)
    standardised = (k1 - mean) / math.sqrt(variance)
    assert stats.kstest(standardised, "norm").pvalue > 1e-3


def test_a_numeric_leaderboard_of_many_items_names_the_normal_test() -> None:
    rng = np.random.default_rng(6)
    first = rng.uniform(0, 1, 30_000).round(3)
    second = (first + rng.uniform(-0.5, 0.52, 30_000)).round(3)
    matrix = np.column_stack([first, second])

    board = scorer_board(scorer="judge", runs=[1, 2], matrix=matrix, numeric=True)

    assert board.pairwise_test == "sign_flip_normal"
    (pair,) = board.pairs
    differences = second - first
    flip = compare.sign_flip_test(*_grouped(np.round(differences, 12)))
    assert pair.test == "sign_flip_normal"
    assert pair.p_value == pytest.approx(flip.p_value)


def _store_scores(run: Run, values: np.ndarray) -> Run:
    """One succeeded result per item of the run's dataset, scored ``values``."""
    now = timezone.now()
    items = list(run.dataset.items.order_by("index").values_list("pk", "index"))
    Result.objects.bulk_create(
        Result(
            run=run,
            item_id=pk,
            item_index=index,
            status=Result.Status.SUCCEEDED,
            output="answer",
            started_at=now,
            finished_at=now,
        )
        for pk, index in items
    )
    results = dict(Result.objects.filter(run=run).values_list("item_index", "pk"))
    Score.objects.bulk_create(
        Score(
            result_id=results[index],
            scorer="judge",
            value=float(values[index]),
            passed=bool(values[index] >= 0.5),
        )
        for _, index in items
    )
    return finish(run)


@pytest.mark.django_db
def test_a_comparison_of_many_items_names_the_normal_test_and_interval(
    project: Project,
) -> None:
    # Differences of comparable size: effective items close to n.
    n = 10_500
    rng = np.random.default_rng(9)
    dataset = make_dataset(
        project, [{"id": f"q{i}", "input": f"q {i}"} for i in range(n)], name="big"
    )
    base_values = np.full(n, 0.35)
    changes = rng.choice([-1.0, 1.0], n, p=[0.48, 0.52]) * rng.uniform(0.25, 0.3, n)
    cand_values = (base_values + changes).round(3)
    baseline = _store_scores(make_run(dataset, scorers=["judge"]), base_values)
    candidate = _store_scores(make_run(dataset, scorers=["judge"]), cand_values)

    (row,) = compare.compare_runs(baseline=baseline, candidates=[candidate]).scorers

    differences = cand_values - base_values
    assert row.test == "sign_flip_normal"
    assert row.interval == "sign_flip_normal_inverted"
    assert row.paired == n
    assert row.delta == pytest.approx(differences.mean())
    reference = compare.sign_flip_test(*_grouped(np.round(differences, 12)))
    assert row.p_value == pytest.approx(reference.p_value, rel=1e-6)
    low, high = row.delta_ci
    assert low < row.delta < high
    assert (low > 0 or high < 0) == (row.verdict != "no_significant_difference")

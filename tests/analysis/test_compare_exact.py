"""The comparison's small-sample tests and intervals against independent
references: scipy's permutation test, statsmodels' McNemar, exact enumeration.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from runs.analysis import compare
from runs.models import Project
from tests.comparisons import add_result, finish, make_run
from tests.factories import arithmetic_items, make_dataset


def _scipy_sign_flip_p(differences: np.ndarray) -> float:
    """Two-sided exact p of the paired sign-flip test, by scipy."""
    result = stats.permutation_test(
        (differences,),
        np.mean,
        permutation_type="samples",
        n_resamples=np.inf,
        alternative="two-sided",
    )
    return float(result.pvalue)


def _grouped(differences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, counts = np.unique(differences, return_counts=True)
    return values, counts


def test_one_item_is_never_significant() -> None:
    # One item whose f1 goes from 0.667 to 0.75: p = 1, not 1/2001.
    test = compare.sign_flip_test(np.array([0.75 - 0.667]), np.array([1]))

    assert test.p_value == 1.0
    assert test.interval(alpha=compare.ALPHA) is None


def test_three_equal_improvements_give_a_quarter() -> None:
    test = compare.sign_flip_test(np.array([0.083]), np.array([3]))

    assert test.exact
    assert test.p_value == pytest.approx(0.25)


@pytest.mark.parametrize("k", range(1, 13))
def test_k_identical_differences_give_two_over_two_to_the_k(k: int) -> None:
    test = compare.sign_flip_test(np.array([0.2]), np.array([k]))

    assert test.p_value == pytest.approx(min(1.0, 2 / 2**k))
    if k > 1:  # scipy's test wants two observations
        assert test.p_value == pytest.approx(_scipy_sign_flip_p(np.full(k, 0.2)))


@pytest.mark.parametrize("seed", range(12))
def test_exact_sign_flip_agrees_with_scipys_permutation_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 13))
    # Three-decimal scores: ties and zero differences, as real scores give.
    differences = (rng.normal(0.15, 0.3, n)).round(2)
    differences[rng.random(n) < 0.2] = 0.0

    test = compare.sign_flip_test(*_grouped(differences))

    assert test.exact
    assert test.p_value == pytest.approx(_scipy_sign_flip_p(differences))


def test_zero_differences_do_not_change_the_p_value() -> None:
    with_zeros = compare.sign_flip_test(
        np.array([-0.1, 0.0, 0.2, 0.3]), np.array([1, 5, 2, 1])
    )
    without = compare.sign_flip_test(np.array([-0.1, 0.2, 0.3]), np.array([1, 2, 1]))

    assert with_zeros.p_value == pytest.approx(without.p_value)


def test_drawn_sign_flip_agrees_with_the_exact_test() -> None:
    # 18 distinct differences: 2^18 sign vectors, more than are enumerated.
    rng = np.random.default_rng(5)
    differences = rng.normal(0.2, 0.5, 18)

    test = compare.sign_flip_test(differences, np.ones(18, dtype=np.int64))

    assert not test.exact
    assert test.p_value == pytest.approx(_scipy_sign_flip_p(differences), abs=0.02)
    assert test.p_value == compare.sign_flip_test(differences, np.ones(18)).p_value


def test_drawn_sign_flip_counts_the_observed_sign_vector() -> None:
    # 40 distinct improvements: no random sign vector reaches the observed
    # sum, and p is (0 + 1) / (B + 1), never 0.
    differences = np.linspace(0.1, 0.5, 40)

    test = compare.sign_flip_test(differences, np.ones(40, dtype=np.int64))

    assert test.p_value == 1 / (compare.RESAMPLES + 1)


@pytest.mark.parametrize("seed", range(20))
def test_the_sign_flip_interval_excludes_zero_exactly_when_p_is_below_alpha(
    seed: int,
) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(5, 15))
    differences = rng.normal(rng.uniform(0, 0.6), 0.4, n).round(2)
    test = compare.sign_flip_test(*_grouped(differences))

    for alpha in (0.05, 0.025, 0.01):
        interval = test.interval(alpha=alpha)
        if interval is None:
            assert test.p_value >= alpha
            continue
        low, high = interval
        assert low <= test.mean <= high
        assert (low > 0 or high < 0) == (test.p_value < alpha)


def test_mcnemar_interval_excludes_zero_exactly_when_the_exact_test_rejects() -> None:
    # Every 2x2 paired table with n <= 30: the interval reads the discordant
    # cells and n only, so every (regressions, improvements, n) is every table.
    for n in range(1, 31):
        for b in range(n + 1):
            for c in range(n + 1 - b):
                low, high = compare.mcnemar_interval(
                    both_passed=n - b - c, regressions=b, improvements=c, both_failed=0
                )
                p = compare.mcnemar_exact(regressions=b, improvements=c)
                assert -1 <= low <= (c - b) / n <= high <= 1
                assert (low > 0 or high < 0) == (p < compare.ALPHA), (b, c, n)


def test_mcnemar_interval_reads_the_concordant_cells_only_through_n() -> None:
    for a in range(0, 11):
        assert compare.mcnemar_interval(
            both_passed=a, regressions=2, improvements=7, both_failed=10 - a
        ) == compare.mcnemar_interval(
            both_passed=0, regressions=2, improvements=7, both_failed=10
        )


def test_mcnemar_exact_agrees_with_statsmodels() -> None:
    for b in range(0, 31):
        for c in range(0, 31 - b):
            reference = mcnemar([[5, b], [c, 5]], exact=True).pvalue
            assert compare.mcnemar_exact(
                regressions=b, improvements=c
            ) == pytest.approx(reference)


def test_four_improvements_among_a_hundred_is_no_difference_by_both() -> None:
    # 50 both passed, 0 regressions, 4 improvements, 46 both failed: McNemar
    # p = 0.125; the uncorrected Newcombe interval was [+0.002, +0.077].
    p = compare.mcnemar_exact(regressions=0, improvements=4)
    low, high = compare.mcnemar_interval(
        both_passed=50, regressions=0, improvements=4, both_failed=46
    )

    assert p == pytest.approx(mcnemar([[50, 0], [4, 46]], exact=True).pvalue)
    assert p == pytest.approx(0.125)
    assert low < 0 < high


def _exact_mcnemar_power(n: int, psi: float, effect: float, alpha: float) -> float:
    """Power by enumeration of every (discordant, improvements) count."""
    q = (psi + effect) / (2 * psi)
    power = 0.0
    for k in range(1, n + 1):
        x = np.arange(k + 1)
        p_values = np.minimum(
            1, 2 * np.minimum(stats.binom.cdf(x, k, 0.5), stats.binom.sf(x - 1, k, 0.5))
        )
        rejects = p_values < alpha
        power += stats.binom.pmf(k, n, psi) * stats.binom.pmf(x, k, q)[rejects].sum()
    return float(power)


@pytest.mark.parametrize(
    ("n", "discordant", "alpha"),
    [(60, 12, 0.05), (150, 30, 0.05), (300, 45, 0.05), (200, 40, 0.05 / 3)],
)
def test_the_exact_tests_power_at_the_mde_is_eighty_percent(
    n: int, discordant: int, alpha: float
) -> None:
    mde = compare.mcnemar_mde(paired=n, discordant=discordant, alpha=alpha)
    assert mde is not None

    power = _exact_mcnemar_power(n, max(discordant / n, mde), mde, alpha)

    assert compare.POWER <= power < 0.85


def test_the_mde_grows_at_a_holm_adjusted_level() -> None:
    at_alpha = compare.mcnemar_mde(paired=200, discordant=40)
    adjusted = compare.mcnemar_mde(paired=200, discordant=40, alpha=0.05 / 4)

    assert at_alpha is not None and adjusted is not None
    assert adjusted > at_alpha


def test_identical_differences_have_no_spread_and_no_mde() -> None:
    # 0.1 summed ten times is not 1.0: an exact sd == 0 test would see spread.
    test = compare.sign_flip_test(np.array([0.1] * 10), np.ones(10, dtype=np.int64))

    assert test.sd == 0
    assert compare.sign_flip_mde(test=test) is None


# Through the comparison, from stored results.


def _numeric_runs(
    project: Project, pairs: list[tuple[float, float]], name: str = "f1set"
) -> compare.ScorerComparison:
    dataset = make_dataset(project, arithmetic_items(len(pairs)), name=name)
    baseline = make_run(dataset, scorers=["f1"])
    candidate = make_run(dataset, scorers=["f1"])
    items = list(dataset.items.order_by("index"))
    for item, (before, after) in zip(items, pairs, strict=True):
        add_result(baseline, item, {"f1": before})
        add_result(candidate, item, {"f1": after})
    comparison = compare.compare_runs(
        baseline=finish(baseline), candidates=[finish(candidate)]
    )
    (row,) = comparison.scorers
    return row


@pytest.mark.django_db
def test_one_items_f1_gain_is_no_significant_difference(project: Project) -> None:
    row = _numeric_runs(project, [(0.667, 0.75)])

    assert row.p_value == 1.0
    assert row.verdict == "no_significant_difference"
    assert row.test == "sign_flip_exact"
    assert row.delta_ci is None


@pytest.mark.django_db
def test_three_equal_f1_gains_give_a_quarter(project: Project) -> None:
    row = _numeric_runs(project, [(0.5, 0.6), (0.3, 0.4), (0.2, 0.3)])

    assert row.p_value == pytest.approx(0.25)
    assert row.verdict == "no_significant_difference"


@pytest.mark.django_db
def test_delta_is_the_difference_of_the_means_exactly(project: Project) -> None:
    pairs = [(0.0, 0.1234567891234), (0.5, 0.5000000004), (0.25, 0.75)]

    row = _numeric_runs(project, pairs)

    assert row.delta == row.candidate_mean - row.baseline_mean


@pytest.mark.django_db
def test_each_rows_interval_excludes_zero_exactly_when_its_verdict_is_not_none(
    project: Project,
) -> None:
    # Three candidates: raw p of 0.001, 0.031 and 0.51; Holm keeps the first.
    dataset = make_dataset(project, arithmetic_items(60), name="sixty")
    items = list(dataset.items.order_by("index"))
    baseline = make_run(dataset, name="baseline")
    for i, item in enumerate(items):
        add_result(baseline, item, {"exact_match": float(i < 20)})
    candidates = []
    for regressions, improvements in [(0, 11), (0, 6), (3, 6)]:
        candidate = make_run(dataset, name=f"r{regressions}i{improvements}")
        for i, item in enumerate(items):
            passed = regressions <= i < 20 + improvements
            add_result(candidate, item, {"exact_match": float(passed)})
        candidates.append(finish(candidate))

    rows = compare.compare_runs(baseline=finish(baseline), candidates=candidates)

    p_values = [row.p_value for row in rows.scorers]
    assert p_values[1] < compare.ALPHA < rows.scorers[1].p_value_adjusted
    for row in rows.scorers:
        assert row.delta_ci is not None
        low, high = row.delta_ci
        significant = row.verdict != "no_significant_difference"
        assert (low > 0 or high < 0) == significant
    for row in rows.scorers:
        assert row.ci_level is not None
        assert row.ci_level == pytest.approx(
            1 - compare.ALPHA * row.p_value / row.p_value_adjusted
        )


def test_the_sign_flip_tests_false_positive_rate_is_at_most_nominal() -> None:
    # A small seeded simulation under "no difference" (the full one is in
    # bench/stats_error_rates.py): the bootstrap rejected 32% at n = 3.
    rng = np.random.default_rng(2024)
    for n in (3, 10, 30):
        rejected = sum(
            compare.sign_flip_test(rng.normal(0, 1, n), np.ones(n, np.int64)).p_value
            < compare.ALPHA
            for _ in range(200)
        )
        # 5% give or take three standard errors of 200 samples (1.5% each).
        assert rejected / 200 <= 0.10, n

"""A judge against people: kappa against statsmodels, McNemar against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.inter_rater import cohens_kappa, to_table

from runs.analysis.compare import mcnemar_exact
from runs.analysis.judge_agreement import (
    calibrated,
    calibration_gap,
    judge_against_people,
)


def verdicts(seed: int, n: int, *, strict: float = 0.0) -> tuple[list, list]:
    """People's verdicts, and a judge that agrees 85% of the time and fails
    an extra ``strict`` share of the items people pass."""
    rng = np.random.default_rng(seed)
    people = [bool(x) for x in rng.random(n) < 0.6]
    judge = [p if rng.random() < 0.85 else not p for p in people]
    judge = [
        False if p and rng.random() < strict else j
        for j, p in zip(judge, people, strict=True)
    ]
    return judge, people


@pytest.mark.parametrize(
    ("stricter", "laxer"), [(0, 0), (3, 0), (7, 2), (20, 31), (500, 430), (1, 1)]
)
def test_mcnemar_exact_matches_scipy_and_exact_enumeration(
    stricter: int, laxer: int
) -> None:
    # The judge's test is the comparisons' (it was written twice): scipy's
    # binomial test, and twice the smaller tail summed in exact integers.
    n = stricter + laxer
    expected = 1.0 if n == 0 else binomtest(stricter, n).pvalue
    tail = sum(math.comb(n, i) for i in range(min(stricter, laxer) + 1))
    enumerated = min(1.0, 2 * tail / 2**n)
    found = mcnemar_exact(regressions=stricter, improvements=laxer)
    assert found == pytest.approx(expected, rel=1e-9)
    assert found == pytest.approx(enumerated, rel=1e-9)
    assert judge_against_people(
        [False] * stricter + [True] * laxer,
        [True] * stricter + [False] * laxer,
        replicates=10,
    ).p_value == pytest.approx(enumerated, rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_kappa_and_confusion_match_statsmodels(seed: int) -> None:
    judge, people = verdicts(seed, 120)
    result = judge_against_people(judge, people, replicates=200)
    table = to_table(np.column_stack([judge, people]).astype(int), bins=np.arange(3))[0]
    assert result.kappa.value == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
    c = result.confusion
    # Rows: the judge's verdict (0 fail, 1 pass); columns: the people's.
    assert (c.both_fail, c.judge_fails_people_pass) == (table[0, 0], table[0, 1])
    assert (c.judge_passes_people_fail, c.both_pass) == (table[1, 0], table[1, 1])
    assert result.precision == pytest.approx(table[0, 0] / table[0].sum())
    assert result.recall == pytest.approx(table[0, 0] / table[:, 0].sum())
    assert result.items == 120
    low, high = result.kappa.interval
    assert low <= result.kappa.value <= high


def test_items_without_both_verdicts_are_left_out() -> None:
    judge = [True, False, None, True, False]
    people = [True, None, False, False, False]
    result = judge_against_people(judge, people, replicates=0)
    assert result.items == 3
    assert result.confusion.both_fail == 1
    assert result.confusion.judge_passes_people_fail == 1
    assert result.confusion.both_pass == 1


def test_a_strict_judge_is_called_stricter() -> None:
    judge, people = verdicts(1, 400, strict=0.3)
    result = judge_against_people(judge, people, replicates=0)
    assert result.direction == "stricter"
    assert result.judge_fail_rate > result.people_fail_rate
    assert result.p_value < 0.05


def test_a_lax_judge_is_called_laxer() -> None:
    people, judge = verdicts(1, 400, strict=0.3)  # roles swapped
    assert judge_against_people(judge, people, replicates=0).direction == "laxer"


def test_a_small_asymmetry_is_even_but_leans() -> None:
    judge = [False, False, True, True, True, True]
    people = [True, False, True, True, True, False]
    result = judge_against_people(judge, people, replicates=0)
    assert result.leaning == "even"
    judge = [False, False, True, True]
    people = [True, False, True, True]
    result = judge_against_people(judge, people, replicates=0)
    assert result.leaning == "stricter" and result.direction == "even"


def test_a_judge_that_never_fails_has_no_precision_and_undefined_kappa() -> None:
    result = judge_against_people([True] * 10, [True] * 10, replicates=50)
    assert result.precision is None and result.recall is None
    assert result.kappa.value is None
    assert "undefined" in calibration_gap(result, 0.6, 5)
    assert not calibrated(result, 0.6, 5)


def test_calibrated_needs_kappa_and_items() -> None:
    judge, people = verdicts(2, 200)
    result = judge_against_people(judge, people, replicates=0)
    assert result.kappa.value is not None and result.kappa.value > 0.6
    assert calibrated(result, 0.6, 50)
    assert "fewer than the 500" in calibration_gap(result, 0.6, 500)
    assert "under the threshold" in calibration_gap(result, 0.95, 50)


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="people: 2 verdicts"):
        judge_against_people([True, False, True], [True, False])

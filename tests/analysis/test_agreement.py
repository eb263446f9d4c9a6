"""Agreement between raters, checked against statsmodels and the krippendorff
package on synthetic label sets."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import (
    aggregate_raters,
    cohens_kappa,
    fleiss_kappa,
    to_table,
)

from runs.analysis import agreement
from runs.analysis.agreement import Undefined

SEEDS = range(8)


def noisy_labels(
    seed: int, raters: int, items: int, *, k: int = 4, accuracy: float = 0.6
) -> list[list[int]]:
    """Raters who each give the item's true category with ``accuracy``, else
    one at random."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, items)
    return [
        [int(t) if rng.random() < accuracy else int(rng.integers(0, k)) for t in truth]
        for _ in range(raters)
    ]


def with_missing(
    matrix: list[list[int]], seed: int, share: float
) -> list[list[int | None]]:
    rng = np.random.default_rng(seed + 1000)
    return [[None if rng.random() < share else v for v in row] for row in matrix]


def as_float(matrix: Sequence[Sequence[int | None]]) -> np.ndarray:
    return np.array(
        [[np.nan if v is None else v for v in row] for row in matrix], dtype=float
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_statsmodels(seed: int, weights: str | None) -> None:
    first, second = noisy_labels(seed, 2, 60, k=5)
    table = to_table(np.column_stack([first, second]), bins=np.arange(6))[0]
    expected = cohens_kappa(table, wt=weights).kappa
    got = agreement.cohen_kappa(first, second, weights=weights)  # type: ignore[arg-type]
    assert got == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_with_a_category_only_one_rater_used() -> None:
    first = [0, 1, 2, 1, 0, 2]
    second = [0, 1, 1, 1, 0, 0]
    table = to_table(np.column_stack([first, second]), bins=np.arange(4))[0]
    got = agreement.cohen_kappa(first, second, weights="linear")
    assert got == pytest.approx(cohens_kappa(table, wt="linear").kappa)


def test_cohen_kappa_skips_items_one_rater_left() -> None:
    first = [1, 0, None, 1, 0, 1]
    second = [1, 1, 0, 1, None, 0]
    both = [(a, b) for a, b in zip(first, second, strict=True) if None not in (a, b)]
    table = to_table(np.array(both), bins=np.arange(3))[0]
    got = agreement.cohen_kappa(first, second)
    assert got == pytest.approx(cohens_kappa(table).kappa)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("raters", [2, 3, 5])
def test_fleiss_kappa_matches_statsmodels(seed: int, raters: int) -> None:
    labels = np.array(noisy_labels(seed, raters, 50)).T  # items x raters
    table = aggregate_raters(labels, n_cat=4)[0]
    assert agreement.fleiss_kappa(table) == pytest.approx(
        fleiss_kappa(table, method="fleiss"), abs=1e-12
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("level", agreement.LEVELS)
@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_krippendorff_alpha_matches_the_package(
    seed: int, level: agreement.Level, missing: float
) -> None:
    matrix = with_missing(noisy_labels(seed, 4, 40, k=5), seed, missing)
    expected = krippendorff.alpha(as_float(matrix), level_of_measurement=level)
    got = agreement.krippendorff_alpha(matrix, level=level)
    assert got == pytest.approx(expected, abs=1e-10)


def test_krippendorff_alpha_on_krippendorffs_own_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the
    # 4 observers x 12 units example: nominal alpha 0.743.
    n = None
    matrix = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    assert agreement.krippendorff_alpha(matrix) == pytest.approx(0.743, abs=5e-4)
    assert agreement.krippendorff_alpha(matrix, level="interval") == pytest.approx(
        krippendorff.alpha(as_float(matrix), level_of_measurement="interval")
    )


def test_ordinal_alpha_over_named_categories_in_their_order() -> None:
    order = ["bad", "poor", "fair", "good", "great"]
    numbers = noisy_labels(3, 3, 30, k=5)
    named = [[order[v] for v in row] for row in numbers]
    expected = krippendorff.alpha(
        np.array(numbers, dtype=float), level_of_measurement="ordinal"
    )
    got = agreement.krippendorff_alpha(named, level="ordinal", categories=order)
    assert got == pytest.approx(expected)


def test_perfect_agreement_is_one() -> None:
    matrix = [[0, 1, 2, 1, 0, None], [0, 1, 2, 1, 0, 2], [0, 1, 2, 1, None, 2]]
    assert agreement.percent_agreement(matrix) == 1.0
    assert agreement.krippendorff_alpha(matrix) == pytest.approx(1.0)
    assert agreement.cohen_kappa(matrix[0], matrix[1]) == pytest.approx(1.0)
    table = aggregate_raters(np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2]]))[0]
    assert agreement.fleiss_kappa(table) == pytest.approx(fleiss_kappa(table))


def test_chance_agreement_is_near_zero() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.integers(0, 3, size=(3, 5000)).tolist()
    assert abs(agreement.krippendorff_alpha(matrix)) < 0.02
    assert abs(agreement.cohen_kappa(matrix[0], matrix[1])) < 0.03
    table = aggregate_raters(np.array(matrix).T)[0]
    assert agreement.fleiss_kappa(table) == pytest.approx(fleiss_kappa(table))
    assert abs(agreement.fleiss_kappa(table)) < 0.02


def test_exact_chance_table_gives_kappa_zero() -> None:
    # Every pair of categories equally often: observed = expected agreement.
    first, second = zip(*itertools.product([0, 1, 2], repeat=2), strict=True)
    table = to_table(np.column_stack([first, second]))[0]
    assert agreement.cohen_kappa(first, second) == pytest.approx(0.0, abs=1e-12)
    assert cohens_kappa(table).kappa == pytest.approx(0.0, abs=1e-12)


def test_a_single_category_is_undefined_not_zero() -> None:
    matrix = [["pass"] * 5, ["pass"] * 5]
    with pytest.raises(Undefined, match="chance agreement is total"):
        agreement.cohen_kappa(*matrix)
    with pytest.raises(Undefined, match="no variation"):
        agreement.krippendorff_alpha(matrix)
    with pytest.raises(Undefined, match="same category"):
        agreement.fleiss_kappa([[2, 0], [2, 0]])
    # The references divide 0 by 0 here.
    with np.errstate(all="ignore"):
        assert np.isnan(fleiss_kappa(np.array([[2, 0], [2, 0]])))
    assert agreement.percent_agreement(matrix) == 1.0


def test_no_item_with_two_labels_is_undefined() -> None:
    matrix = [[1, None, 2], [None, 1, None]]
    with pytest.raises(Undefined, match="two labels"):
        agreement.krippendorff_alpha(matrix)
    with pytest.raises(Undefined, match="both raters"):
        agreement.cohen_kappa(*matrix)
    with pytest.raises(Undefined, match="two labels"):
        agreement.percent_agreement(matrix)


def test_report_says_why_a_statistic_is_undefined() -> None:
    report = agreement.rater_agreement([["yes"] * 4, ["yes"] * 4], replicates=50)
    kappa = report.estimates["cohen_kappa"]
    assert kappa.value is None and kappa.interval is None
    assert "undefined" in kappa.undefined
    assert report.estimates["percent_agreement"].value == 1.0
    assert report.disagreements == []


def test_percent_agreement_counts_agreeing_pairs() -> None:
    # Item 0: 3 of 3 pairs agree; item 1: 1 of 3 (a, a, b); item 2: one label.
    matrix = [["a", "a", "a"], ["a", "a", None], ["a", "b", None]]
    assert agreement.percent_agreement(matrix) == pytest.approx(4 / 6)


def test_disagreements_list_the_items_and_their_labels() -> None:
    matrix = [["a", "b", "a", None], ["a", "a", None, "b"], ["a", "b", "b", "b"]]
    found = agreement.disagreements(matrix)
    assert [d.item for d in found] == [1, 2]
    assert found[0].labels == ("b", "a", "b")
    assert found[0].counts == {"a": 1, "b": 2}
    assert found[1].labels == ("a", None, "b")


def test_bad_labels_name_the_rater_and_item() -> None:
    with pytest.raises(ValueError, match=r"labels\[1\]\[2\]"):
        agreement.krippendorff_alpha([[1, 2, 3], [1, 2, 9]], categories=[1, 2, 3])
    with pytest.raises(ValueError, match=r"labels\[1\]: 2 items"):
        agreement.percent_agreement([[1, 2, 3], [1, 2]])
    with pytest.raises(ValueError, match="numeric"):
        agreement.krippendorff_alpha([["a", "b"], ["a", "a"]], level="interval")
    with pytest.raises(ValueError, match=r"counts\[1\]"):
        agreement.fleiss_kappa([[2, 1], [1, 1]])


def test_report_has_every_statistic_for_two_raters_on_a_scale() -> None:
    matrix = with_missing(noisy_labels(2, 2, 80, k=5), 2, 0.1)
    report = agreement.rater_agreement(matrix, level="ordinal", replicates=200)
    names = set(report.estimates)
    assert names == {
        "percent_agreement",
        "krippendorff_alpha_ordinal",
        "fleiss_kappa",
        "cohen_kappa",
        "cohen_kappa_linear",
        "cohen_kappa_quadratic",
    }
    alpha = report.estimates["krippendorff_alpha_ordinal"]
    assert alpha.value == pytest.approx(
        krippendorff.alpha(as_float(matrix), level_of_measurement="ordinal")
    )
    both = sum(1 for a, b in zip(*matrix, strict=True) if None not in (a, b))
    assert report.estimates["cohen_kappa"].items == both
    for estimate in report.estimates.values():
        assert estimate.interval is not None
        assert estimate.value is not None
        assert estimate.interval[0] <= estimate.value <= estimate.interval[1]


def test_bootstrap_is_seeded() -> None:
    matrix = noisy_labels(4, 3, 60)
    one = agreement.rater_agreement(matrix, replicates=300, seed=5)
    two = agreement.rater_agreement(matrix, replicates=300, seed=5)
    other = agreement.rater_agreement(matrix, replicates=300, seed=6)
    alpha = "krippendorff_alpha_nominal"
    assert one.estimates[alpha].interval == two.estimates[alpha].interval
    assert one.estimates[alpha].interval != other.estimates[alpha].interval


def test_bootstrap_matches_a_plain_resampling_loop() -> None:
    """The weighted-sum bootstrap equals recomputing alpha on each resample
    with the krippendorff package, draw for draw."""
    matrix = with_missing(noisy_labels(9, 3, 30), 9, 0.2)
    coded = agreement.code_labels(matrix)
    parts = agreement.alpha_parts(coded)
    keep = np.any(parts != 0, axis=1)
    parts = parts[keep]
    columns = as_float(matrix)[:, keep]
    rng = np.random.default_rng(11)
    n = parts.shape[0]
    for _ in range(20):
        draw = rng.integers(0, n, n)
        weights = np.bincount(draw, minlength=n).astype(float)
        ours = agreement.alpha_from(weights @ parts, "nominal", coded.categories)
        theirs = krippendorff.alpha(
            columns[:, draw],
            level_of_measurement="nominal",
            value_domain=list(coded.categories),
        )
        assert ours == pytest.approx(theirs, abs=1e-10)


def test_bootstrap_counts_undefined_resamples() -> None:
    # Nearly all one category: many resamples hold that category only.
    matrix = [["a"] * 19 + ["b"], ["a"] * 19 + ["b"]]
    report = agreement.rater_agreement(matrix, replicates=400, seed=1)
    kappa = report.estimates["cohen_kappa"]
    assert kappa.value == pytest.approx(1.0)
    assert 0 < kappa.undefined_replicates < 400


def scalar_or_nan(compute, sums: np.ndarray) -> float:
    try:
        return compute(sums)
    except Undefined:
        return float("nan")


@pytest.mark.parametrize("level", agreement.LEVELS)
def test_batch_statistics_equal_the_scalar_ones(level: agreement.Level) -> None:
    """Over resamples (some of one category only), the vectorised statistics
    give what the scalar ones give, NaN where those are undefined."""
    matrix = [["a"] * 14 + ["b", "c"], ["a"] * 13 + ["b", "c", "c"]]
    cats = ["a", "b", "c"] if level != "interval" else None
    if level == "interval":
        matrix = [[{"a": 1, "b": 2, "c": 5}[v] for v in row] for row in matrix]
    coded = agreement.code_labels(matrix, cats)
    rng = np.random.default_rng(0)
    draws = rng.multinomial(16, np.full(16, 1 / 16), size=300).astype(float)
    cases = [
        (
            agreement.agreement_parts(coded),
            agreement.agreement_from,
            agreement.agreement_batch,
        ),
        (
            agreement.alpha_parts(coded),
            lambda s: agreement.alpha_from(s, level, coded.categories),
            lambda s: agreement.alpha_batch(s, level, coded.categories),
        ),
        (
            agreement.fleiss_parts(coded.counts()),
            lambda s: agreement.fleiss_from(s, 2, s[:-1].sum() / 2),
            lambda s: agreement.fleiss_batch(s, 2),
        ),
    ]
    for weights in (None, "linear", "quadratic"):
        w = agreement.kappa_weights(3, weights)  # type: ignore[arg-type]
        cases.append(
            (
                agreement.cohen_parts(coded),
                lambda s, w=w: agreement.cohen_from(s, w),
                lambda s, w=w: agreement.cohen_batch(s, w),
            )
        )
    undefined = 0
    for parts, scalar, batch in cases:
        sums = draws @ parts
        expected = np.array([scalar_or_nan(scalar, row) for row in sums])
        got = batch(sums)
        undefined += int(np.isnan(expected).sum())
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert undefined > 0  # resamples of one category only are exercised


def test_the_bootstrap_gives_the_same_interval_with_or_without_batch() -> None:
    matrix = noisy_labels(12, 2, 70, k=3)
    coded = agreement.code_labels(matrix)
    parts = agreement.cohen_parts(coded)
    w = agreement.kappa_weights(3, None)
    plain = agreement.bootstrap(
        "k", parts, lambda s: agreement.cohen_from(s, w), replicates=500, seed=3
    )
    fast = agreement.bootstrap(
        "k",
        parts,
        lambda s: agreement.cohen_from(s, w),
        batch=lambda s: agreement.cohen_batch(s, w),
        replicates=500,
        seed=3,
    )
    assert plain.interval == pytest.approx(fast.interval)

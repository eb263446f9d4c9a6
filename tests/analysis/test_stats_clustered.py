"""The pass rate's interval with several epochs, clustered by item."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from runs.analysis import stats
from tests.analysis.clustered_reference import clustered_wilson


def _groups(per_item: list[list[bool]]) -> list[tuple[int, int, int]]:
    counted = Counter((len(v), sum(v)) for v in per_item)
    return [(n, c, items) for (n, c), items in counted.items()]


def _interval(per_item: list[list[bool]]) -> tuple[float, float] | None:
    passed = sum(sum(v) for v in per_item)
    judged = sum(len(v) for v in per_item)
    return stats.clustered_interval(passed, judged, _groups(per_item))


def test_items_that_always_pass_or_fail_are_not_independent_trials() -> None:
    # 20 items x 5 epochs, each item passing every epoch or none: 20 trials,
    # not 100 (Wilson over 100 gives [0.404, 0.596]).
    per_item = [[True] * 5] * 10 + [[False] * 5] * 10

    low, high = _interval(per_item) or (0.0, 0.0)

    assert stats.wilson_interval(50, 100) == pytest.approx((0.404, 0.596), abs=1e-3)
    assert (low, high) == pytest.approx(clustered_wilson(per_item))
    assert high - low > 0.35
    assert low < 0.3 and high > 0.7


@pytest.mark.parametrize("seed", range(5))
def test_items_with_different_judged_counts_match_statsmodels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    per_item = [
        list(rng.random(rng.integers(1, 8)) < rng.beta(0.7, 0.5)) for _ in range(30)
    ]
    assert _interval(per_item) == pytest.approx(clustered_wilson(per_item))


def test_the_point_estimate_is_passed_over_judged_inside_the_interval() -> None:
    per_item = [[True, True, True], [False], [True, False], [False, False, True]]
    low, high = _interval(per_item) or (0.0, 0.0)
    assert 0 <= low < 5 / 10 < high <= 1


def test_every_item_passing_gives_a_width_of_items_not_of_results() -> None:
    per_item = [[True] * 10] * 20

    low, high = _interval(per_item) or (0.0, 0.0)

    assert high == 1.0
    assert low == pytest.approx(clustered_wilson(per_item)[0])
    assert low < stats.wilson_interval(200, 200)[0]  # type: ignore[index]


def test_one_item_has_no_interval() -> None:
    assert stats.clustered_interval(3, 5, [(5, 3, 1)]) is None
    assert stats.clustered_interval(0, 0, []) is None


def test_coverage_with_correlated_epochs_is_near_nominal() -> None:
    # Items' pass chances from Beta(a, b) with a + b = 1: intra-item
    # correlation 0.5. Independent-trial Wilson covers about 73% (5 epochs)
    # and 60% (10); clustered by item, about 95%.
    rng = np.random.default_rng(19)
    for epochs in (5, 10):
        covered = wilson_covered = 0
        runs = 300
        for _ in range(runs):
            chances = rng.beta(0.6, 0.4, size=30)
            passes = rng.binomial(epochs, chances)
            per_item = [[True] * c + [False] * (epochs - c) for c in passes]
            low, high = _interval(per_item) or (1.0, 0.0)
            covered += low <= 0.6 <= high
            w_low, w_high = stats.wilson_interval(int(passes.sum()), 30 * epochs) or (
                1.0,
                0.0,
            )
            wilson_covered += w_low <= 0.6 <= w_high
        assert covered / runs >= 0.91
        assert wilson_covered / runs <= 0.8

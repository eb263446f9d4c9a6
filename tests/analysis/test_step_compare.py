"""Steps per item of two runs compared: Wilcoxon's signed-rank test, held to
the exact distribution by enumerating every sign vector."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import rankdata

from runs.analysis.step_compare import compare_steps
from tests.factories import arithmetic_items, make_dataset
from tests.trajectories.steps import answered_run, result_of, store_steps, tool_step

API = "/api/v1"
# Steps of each item's trajectory in each run: distinct, non-zero differences.
BASELINE = [3, 5, 2, 8, 4, 6, 9, 7]
CANDIDATE = [4, 2, 6, 10, 11, 12, 4, 15]  # differences 1 -3 4 2 7 6 -5 8


def exact_p(differences: list[float]) -> float:
    """Two-sided p of the signed-rank statistic: every sign vector enumerated."""
    ranks = rankdata(np.abs(differences))
    observed = ranks[np.array(differences) > 0].sum()
    totals = [
        sum(r for r, s in zip(ranks, signs, strict=True) if s)
        for signs in itertools.product([False, True], repeat=len(ranks))
    ]
    low = np.mean([t <= observed for t in totals])
    high = np.mean([t >= observed for t in totals])
    return min(1.0, 2 * min(low, high))


@pytest.fixture
def two_runs(project):
    dataset = make_dataset(project, arithmetic_items(len(BASELINE)))
    runs = [answered_run(dataset, name=name) for name in ("a", "b")]
    for run, counts in zip(runs, (BASELINE, CANDIDATE), strict=True):
        for index, count in enumerate(counts):
            store_steps(
                result_of(run, index), [tool_step("t", {"n": n}) for n in range(count)]
            )
    return runs


def test_steps_per_item_are_tested_against_the_exact_distribution(two_runs) -> None:
    comparison = compare_steps(*two_runs)

    steps = next(f for f in comparison.figures if f.measure == "steps")
    differences = [c - b for b, c in zip(BASELINE, CANDIDATE, strict=True)]
    assert comparison.paired_by == "item"
    assert steps.pairs == len(BASELINE)
    assert steps.mean_difference == pytest.approx(np.mean(differences))
    assert steps.p_value == pytest.approx(exact_p(differences))


def test_identical_runs_have_nothing_to_test(project) -> None:
    dataset = make_dataset(project, arithmetic_items(3))
    runs = [answered_run(dataset, name=name) for name in ("a", "b")]

    steps = compare_steps(*runs).figures[0]

    assert (steps.pairs, steps.mean_difference, steps.p_value) == (3, 0.0, None)


def test_the_api_compares_and_refuses_an_outsider(
    victor_client, mallory_client, two_runs
) -> None:
    baseline, candidate = two_runs
    url = f"{API}/trajectories/compare?baseline={baseline.pk}&candidate={candidate.pk}"

    body = victor_client.get(url).json()

    assert body["figures"][0]["measure"] == "steps"
    assert body["figures"][0]["pairs"] == len(BASELINE)
    assert mallory_client.get(url).status_code == 404

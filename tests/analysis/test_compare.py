"""Comparisons of runs: paired tables in the database, tests checked against
scipy, Holm against a hand-checked example, pairing across dataset versions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from runs.analysis import compare
from runs.errors import InvalidInput
from runs.models import Project
from tests.comparisons import add_result, finish, make_run, paired_runs
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def big_dataset(project: Project):
    return make_dataset(project, arithmetic_items(300), name="big")


def _only_row(comparison: compare.Comparison) -> compare.ScorerComparison:
    assert len(comparison.scorers) == 1
    return comparison.scorers[0]


def test_paired_table_cells_come_from_the_stored_results(big_dataset) -> None:
    baseline, candidate = paired_runs(
        big_dataset, both_passed=120, regressions=30, improvements=45, both_failed=55
    )

    row = _only_row(compare.compare_runs(baseline=baseline, candidates=[candidate]))

    assert (row.both_passed, row.regressions, row.improvements, row.both_failed) == (
        120,
        30,
        45,
        55,
    )
    assert row.paired == 250
    assert row.baseline_pass_rate == pytest.approx(150 / 250)
    assert row.candidate_pass_rate == pytest.approx(165 / 250)
    assert row.delta == pytest.approx(15 / 250)


def test_mcnemar_is_the_binomial_test_on_the_discordant_pairs(big_dataset) -> None:
    baseline, candidate = paired_runs(
        big_dataset, both_passed=100, regressions=12, improvements=27, both_failed=61
    )

    row = _only_row(compare.compare_runs(baseline=baseline, candidates=[candidate]))

    expected = stats.binomtest(27, 12 + 27, 0.5, alternative="two-sided").pvalue
    assert row.test == "mcnemar_exact"
    assert row.p_value == pytest.approx(expected)


def test_no_discordant_pairs_is_no_difference(dataset) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=6, regressions=0, improvements=0, both_failed=4
    )

    row = _only_row(compare.compare_runs(baseline=baseline, candidates=[candidate]))

    assert row.p_value == 1.0
    assert row.verdict == "no_significant_difference"
    assert row.delta == 0
    assert row.delta_ci[0] < 0 < row.delta_ci[1]  # Wilson parts never collapse


def test_holm_matches_a_hand_checked_example() -> None:
    # Sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06;
    # 0.04 x 1 = 0.04, raised to the running maximum 0.06.
    adjusted = compare.holm_adjust([0.01, 0.04, 0.03, 0.005])

    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_never_exceeds_one() -> None:
    assert compare.holm_adjust([0.6, 0.5]) == pytest.approx([1.0, 1.0])


def test_holm_is_applied_across_every_candidate_and_scorer(big_dataset) -> None:
    scorers = ("exact_match", "includes")
    baseline = make_run(big_dataset, scorers=scorers)
    candidates = [make_run(big_dataset, scorers=scorers) for _ in range(2)]
    items = list(big_dataset.items.order_by("index")[:100])
    for i, item in enumerate(items):
        add_result(baseline, item, {"exact_match": i % 2, "includes": i % 3 == 0})
        add_result(candidates[0], item, {"exact_match": 1, "includes": i % 3 != 2})
        add_result(candidates[1], item, {"exact_match": i % 4 != 0, "includes": 0})
    runs = [finish(run) for run in (baseline, *candidates)]

    comparison = compare.compare_runs(baseline=runs[0], candidates=runs[1:])

    assert len(comparison.scorers) == 4
    raw = [row.p_value for row in comparison.scorers]
    assert [row.p_value_adjusted for row in comparison.scorers] == pytest.approx(
        compare.holm_adjust(raw)
    )
    verdicts = {(r.candidate, r.scorer): r.verdict for r in comparison.scorers}
    assert verdicts[(runs[1].pk, "exact_match")] == "better"
    assert verdicts[(runs[2].pk, "includes")] == "worse"


def test_newcombe_interval_without_correlation_adds_the_wilson_halves() -> None:
    # phi = 0 when a * d == b * c: the paired interval is then the one of two
    # independent rates (Newcombe's method 10 for unpaired data).
    a, b, c, d = 20, 10, 40, 20
    n = a + b + c + d
    low, high = compare.newcombe_paired_interval(
        both_passed=a, regressions=b, improvements=c, both_failed=d
    )

    cand = stats.binomtest(a + c, n).proportion_ci(method="wilson")
    base = stats.binomtest(a + b, n).proportion_ci(method="wilson")
    p_cand, p_base = (a + c) / n, (a + b) / n
    delta = p_cand - p_base
    assert low == pytest.approx(
        delta - math.hypot(p_cand - cand.low, base.high - p_base)
    )
    assert high == pytest.approx(
        delta + math.hypot(cand.high - p_cand, p_base - base.low)
    )


def test_newcombe_interval_agrees_with_a_paired_bootstrap_on_many_pairs() -> None:
    a, b, c, d = 4000, 700, 800, 1500
    n = a + b + c + d
    low, high = compare.newcombe_paired_interval(
        both_passed=a, regressions=b, improvements=c, both_failed=d
    )
    boot = compare.paired_bootstrap(
        np.array([0.0, -1.0, 1.0]), np.array([a + d, b, c]), resamples=20_000
    )

    assert boot.mean == pytest.approx((c - b) / n)
    assert low == pytest.approx(boot.interval[0], abs=0.002)
    assert high == pytest.approx(boot.interval[1], abs=0.002)


def test_a_failed_call_or_an_errored_score_counts_as_not_passed(dataset) -> None:
    baseline = make_run(dataset)
    candidate = make_run(dataset)
    items = list(dataset.items.order_by("index")[:3])
    for item in items:
        add_result(baseline, item, {"exact_match": 1.0})
    add_result(candidate, items[0], {"exact_match": 1.0})
    add_result(candidate, items[1], {"exact_match": "failed"})
    add_result(candidate, items[2], {"exact_match": "error"})

    row = _only_row(
        compare.compare_runs(baseline=finish(baseline), candidates=[finish(candidate)])
    )

    assert row.paired == 3
    assert (row.both_passed, row.regressions) == (1, 2)
    assert row.candidate_pass_rate == pytest.approx(1 / 3)
    assert row.candidate_mean == pytest.approx(1 / 3)


def test_runs_over_versions_of_a_dataset_pair_by_external_id(project) -> None:
    v1 = make_dataset(project, arithmetic_items(10), name="qa", version=1)
    # Version 2 drops q8 and q9, adds two items, and reorders the rest.
    rows = arithmetic_items(12)
    v2_rows = list(reversed(rows[:8])) + rows[10:]
    v2 = make_dataset(project, v2_rows, name="qa", version=2)
    baseline, candidate = make_run(v1), make_run(v2)
    for item in v1.items.all():
        add_result(baseline, item, {"exact_match": int(item.external_id != "q3")})
    for item in v2.items.all():
        add_result(candidate, item, {"exact_match": 1.0})

    comparison = compare.compare_runs(
        baseline=finish(baseline), candidates=[finish(candidate)]
    )

    row = _only_row(comparison)
    assert comparison.paired_by == "external_id"
    assert row.paired == 8
    assert comparison.unpaired == 4  # q8, q9 only in v1; q10, q11 only in v2
    assert (row.both_passed, row.improvements, row.regressions) == (7, 1, 0)


def test_runs_over_one_dataset_version_pair_by_item(dataset) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=5, regressions=1, improvements=1, both_failed=1
    )

    comparison = compare.compare_runs(baseline=baseline, candidates=[candidate])

    assert comparison.paired_by == "item"
    assert comparison.unpaired == 0


def test_items_without_a_result_in_one_run_are_unpaired(dataset) -> None:
    baseline, candidate = make_run(dataset), make_run(dataset)
    items = list(dataset.items.order_by("index"))
    for item in items:
        add_result(baseline, item, {"exact_match": 1.0})
    for item in items[:7]:
        add_result(candidate, item, {"exact_match": 1.0})

    comparison = compare.compare_runs(
        baseline=finish(baseline), candidates=[finish(candidate)]
    )

    assert comparison.unpaired == 3
    assert _only_row(comparison).paired == 7


def test_runs_over_different_datasets_are_refused(project, dataset) -> None:
    other = make_dataset(project, arithmetic_items(10), name="other")
    baseline, candidate = make_run(dataset), make_run(other)

    with pytest.raises(InvalidInput) as raised:
        compare.compare_runs(baseline=baseline, candidates=[candidate])

    assert raised.value.field == "candidates"


def test_with_epochs_an_items_score_is_its_mean_over_epochs(dataset) -> None:
    baseline = make_run(dataset, epochs=2)
    candidate = make_run(dataset, epochs=2)
    items = list(dataset.items.order_by("index"))
    for i, item in enumerate(items):
        for epoch in range(2):
            add_result(baseline, item, {"exact_match": i < 5}, epoch=epoch)
            passed = i < 5 or (i < 8 and epoch == 0)
            add_result(candidate, item, {"exact_match": passed}, epoch=epoch)

    row = _only_row(
        compare.compare_runs(baseline=finish(baseline), candidates=[finish(candidate)])
    )

    assert row.paired == 10
    assert row.baseline_pass_rate == pytest.approx(0.5)
    assert row.candidate_pass_rate == pytest.approx((5 + 3 * 0.5) / 10)
    assert row.test == "sign_flip_exact"
    assert row.delta == pytest.approx(0.15)
    # Passed in half the epochs counts as passed in the cells.
    assert (row.both_passed, row.improvements, row.both_failed) == (5, 3, 2)


def test_numeric_scores_are_compared_by_mean_with_a_sign_flip_test(
    big_dataset,
) -> None:
    baseline, candidate = make_run(big_dataset), make_run(big_dataset)
    rng = np.random.default_rng(7)
    base_values = rng.uniform(0.2, 0.8, 200).round(3)
    cand_values = (base_values + rng.normal(0.05, 0.1, 200)).clip(0, 1).round(3)
    items = list(big_dataset.items.order_by("index")[:200])
    for item, base, cand in zip(items, base_values, cand_values, strict=True):
        add_result(baseline, item, {"exact_match": float(base)})
        add_result(candidate, item, {"exact_match": float(cand)})

    row = _only_row(
        compare.compare_runs(baseline=finish(baseline), candidates=[finish(candidate)])
    )

    differences = cand_values - base_values
    assert row.measure == "mean"
    assert row.test == "sign_flip_monte_carlo"
    assert row.delta == pytest.approx(differences.mean())
    assert row.delta_ci[0] < differences.mean() < row.delta_ci[1]
    # The interval is close to the t interval of the mean difference.
    t_low, t_high = stats.ttest_1samp(differences, 0).confidence_interval()
    assert row.delta_ci == pytest.approx((t_low, t_high), abs=0.005)
    assert row.verdict == "better"


def test_paired_bootstrap_is_reproducible() -> None:
    values, counts = np.array([-0.5, 0.0, 0.5, 1.0]), np.array([10, 50, 15, 5])

    first = compare.paired_bootstrap(values, counts)
    second = compare.paired_bootstrap(values, counts)

    assert first == second


def test_mcnemar_mde_has_eighty_percent_power() -> None:
    # The exact power of McNemar's test at the effect it names, computed from
    # the binomial distributions: at least 80%, and not far above it.
    n, discordant = 400, 80
    mde = compare.mcnemar_mde(paired=n, discordant=discordant)
    psi = max(discordant / n, mde)
    q = (psi + mde) / (2 * psi)  # share of improvements among discordant pairs
    power = 0.0
    for k in range(1, n + 1):
        x = np.arange(k + 1)
        p_values = np.minimum(
            1, 2 * np.minimum(stats.binom.cdf(x, k, 0.5), stats.binom.sf(x - 1, k, 0.5))
        )
        rejects = p_values <= compare.ALPHA
        power += stats.binom.pmf(k, n, psi) * stats.binom.pmf(x, k, q)[rejects].sum()

    assert compare.POWER <= power < 0.85


def test_mde_is_shown_only_without_a_significant_difference(big_dataset) -> None:
    baseline, candidate = paired_runs(
        big_dataset, both_passed=100, regressions=10, improvements=12, both_failed=78
    )

    row = _only_row(compare.compare_runs(baseline=baseline, candidates=[candidate]))

    assert row.verdict == "no_significant_difference"
    assert 0 < row.mde < 1


def test_item_rows_filter_by_change_and_link_results(dataset) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=4, regressions=3, improvements=2, both_failed=1
    )

    rows = list(
        compare.comparison_item_rows(
            baseline=baseline,
            candidate=candidate,
            scorer="exact_match",
            change="regressions",
        )
    )

    assert [row["external_id"] for row in rows] == ["q4", "q5", "q6"]
    assert {row["change"] for row in rows} == {"regressions"}
    first = rows[0]
    assert (first["baseline_output"], first["candidate_output"]) == ("b1.0", "c0.0")
    assert candidate.results.filter(pk=first["candidate_result"]).exists()


def test_item_rows_with_changed_output(dataset) -> None:
    baseline, candidate = make_run(dataset), make_run(dataset)
    items = list(dataset.items.order_by("index")[:4])
    for i, item in enumerate(items):
        add_result(baseline, item, {"exact_match": 1.0}, output=f"same {i}")
        text = f"same {i}" if i != 2 else "different"
        add_result(candidate, item, {"exact_match": 1.0}, output=text)

    rows = list(
        compare.comparison_item_rows(
            baseline=finish(baseline),
            candidate=finish(candidate),
            scorer="exact_match",
            change="output_changed",
        )
    )

    assert [row["external_id"] for row in rows] == ["q2"]


def test_an_unknown_change_filter_is_refused(dataset) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=1, regressions=0, improvements=0, both_failed=0
    )

    with pytest.raises(InvalidInput) as raised:
        compare.comparison_item_rows(
            baseline=baseline, candidate=candidate, scorer="exact_match", change="x"
        )

    assert raised.value.field == "change"


def test_runs_of_one_epoch_pair_as_runs_of_several_would(dataset) -> None:
    # Runs of one epoch pair their results directly; runs of several group
    # them by item first. Both ways must give the same table.
    baseline, candidate = make_run(dataset), make_run(dataset)
    items = list(dataset.items.order_by("index"))
    for i, item in enumerate(items[:9]):
        add_result(baseline, item, {"exact_match": float(i % 2)})
    for i, item in enumerate(items[1:]):
        add_result(candidate, item, {"exact_match": "failed" if i == 3 else i % 3})
    direct = compare.compare_runs(
        baseline=finish(baseline), candidates=[finish(candidate)]
    )
    for run in (baseline, candidate):
        run.options = {"epochs": 2}

    grouped = compare.compare_runs(baseline=baseline, candidates=[candidate])

    assert grouped.scorers == direct.scorers
    assert grouped.unpaired == direct.unpaired == 2
    assert direct.scorers[0].paired == 8


def test_the_single_scan_of_several_scorers_agrees_with_grouping_by_item(
    big_dataset,
) -> None:
    # Single-epoch runs of one dataset version read every scorer in one scan;
    # runs of several epochs group per item and scorer. Same figures, with a
    # pass/fail scorer, a numeric one, errored scores, failed calls, scores
    # skipped by their condition and items that only one run has.
    scorers = ("exact_match", "judge", "careful")
    baseline = make_run(big_dataset, scorers=scorers)
    candidate = make_run(big_dataset, scorers=scorers)
    rng = np.random.default_rng(11)
    items = list(big_dataset.items.order_by("index"))
    for i, item in enumerate(items[:250]):
        for run in (baseline, candidate):
            if run is candidate and i < 10:
                continue  # unpaired
            draw = rng.random()
            if draw < 0.05:
                add_result(run, item, {"exact_match": "failed"})
                continue
            judge: float | str = round(float(rng.uniform(0, 1)), 3)
            if draw > 0.97:
                judge = "error"
            elif draw > 0.9:
                judge = "skipped"
            exact = float(rng.random() < 0.6)
            # Runs only where exact_match failed, as a condition would.
            careful = float(rng.random() < 0.5) if exact == 0 else "skipped"
            add_result(
                run, item, {"exact_match": exact, "judge": judge, "careful": careful}
            )
    scanned = compare.compare_runs(
        baseline=finish(baseline), candidates=[finish(candidate)]
    )
    for run in (baseline, candidate):
        run.options = {"epochs": 2}

    grouped = compare.compare_runs(baseline=baseline, candidates=[candidate])

    assert [row.measure for row in scanned.scorers] == [
        "pass_rate",
        "mean",
        "pass_rate",
    ]
    assert [row.test for row in scanned.scorers] == [
        "mcnemar_exact",
        "sign_flip_monte_carlo",
        "mcnemar_exact",
    ]
    for fast, slow in zip(scanned.scorers, grouped.scorers, strict=True):
        fast_values, slow_values = fast.as_dict(), slow.as_dict()
        for name in ("baseline_mean", "candidate_mean", "delta", "mde"):
            assert fast_values.pop(name) == pytest.approx(slow_values.pop(name))
        assert fast_values.pop("delta_ci") == pytest.approx(slow_values.pop("delta_ci"))
        assert fast_values == slow_values
    assert scanned.scorers[0].paired == 240
    assert scanned.scorers[0].skipped == 0
    exact, judge, careful = scanned.scorers
    assert 0 < judge.skipped < 60
    assert 100 < careful.skipped < 240
    for row in scanned.scorers:
        assert row.paired + row.skipped == 240
        assert row.unpaired == 10
        listed = compare.ComparisonItems(
            baseline=baseline,
            candidate=candidate,
            scorer=row.scorer,
            paired_by="item",
        )
        assert listed.count() == row.paired
    assert scanned.unpaired == grouped.unpaired == 10


def test_a_score_skipped_in_either_run_is_not_a_pair(dataset) -> None:
    baseline, candidate = make_run(dataset), make_run(dataset)
    items = list(dataset.items.order_by("index"))
    base = [1.0, 1.0, "skipped", 0.0, 1.0, 0.0, "skipped", 1.0]
    cand = [1.0, "skipped", 1.0, 1.0, 0.0, "skipped", "skipped", 1.0]
    for item, b, c in zip(items, base, cand, strict=False):
        add_result(baseline, item, {"exact_match": b})
        add_result(candidate, item, {"exact_match": c})
    add_result(baseline, items[8], {"exact_match": 1.0})  # only in the baseline

    row = _only_row(
        compare.compare_runs(baseline=finish(baseline), candidates=[finish(candidate)])
    )

    # Pairs: items 0, 3, 4 and 7; items 1, 2, 5 and 6 are skipped in one run.
    assert (row.paired, row.skipped, row.unpaired) == (4, 4, 1)
    assert (row.both_passed, row.regressions, row.improvements) == (2, 1, 1)
    assert row.baseline_pass_rate == pytest.approx(3 / 4)
    assert row.candidate_pass_rate == pytest.approx(3 / 4)
    listed = compare.ComparisonItems(
        baseline=baseline, candidate=candidate, scorer="exact_match", paired_by="item"
    )
    assert [r["external_id"] for r in listed[0:10]] == ["q0", "q3", "q4", "q7"]


def test_with_epochs_a_skipped_epoch_leaves_the_items_epochs(dataset) -> None:
    baseline = make_run(dataset, epochs=2)
    candidate = make_run(dataset, epochs=2)
    items = list(dataset.items.order_by("index")[:3])
    # Item 0: one epoch skipped in the candidate, the other passed: a pair.
    # Item 1: both epochs skipped in the baseline: not a pair.
    outcomes = {
        0: ([0.0, 0.0], ["skipped", 1.0]),
        1: (["skipped", "skipped"], [1.0, 1.0]),
        2: ([1.0, 1.0], [1.0, 0.0]),
    }
    for i, item in enumerate(items):
        for epoch in range(2):
            add_result(
                baseline, item, {"exact_match": outcomes[i][0][epoch]}, epoch=epoch
            )
            add_result(
                candidate, item, {"exact_match": outcomes[i][1][epoch]}, epoch=epoch
            )

    row = _only_row(
        compare.compare_runs(baseline=finish(baseline), candidates=[finish(candidate)])
    )

    assert (row.paired, row.skipped, row.unpaired) == (2, 1, 0)
    assert row.baseline_pass_rate == pytest.approx((0 + 1) / 2)
    assert row.candidate_pass_rate == pytest.approx((1 + 0.5) / 2)
    listed = compare.ComparisonItems(
        baseline=baseline, candidate=candidate, scorer="exact_match", paired_by="item"
    )
    first = listed[0:10][0]
    assert (first["external_id"], first["candidate_epochs"]) == ("q0", 1)
    assert first["candidate_pass_rate"] == 1.0


@pytest.mark.parametrize(
    "change", ["", "regressions", "improvements", "both_failed", "both_passed"]
)
def test_counted_items_agree_with_the_paired_table(dataset, change: str) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=4, regressions=3, improvements=2, both_failed=1
    )
    row = _only_row(compare.compare_runs(baseline=baseline, candidates=[candidate]))

    items = compare.ComparisonItems(
        baseline=baseline,
        candidate=candidate,
        scorer="exact_match",
        paired_by="item",
        change=change,
    )

    assert items.count() == compare.item_count(row, change)
    assert len(items[0:100]) == items.count()


def test_differences_equal_but_for_floating_point_are_one_value(
    project: Project,
) -> None:
    # 0.217 - 0.0 and 0.42 - 0.203 are both 0.217, but not in floating point.
    assert 0.217 - 0.0 != 0.42 - 0.203
    dataset = make_dataset(project, arithmetic_items(2), name="two")
    baseline, candidate = (
        make_run(dataset, scorers=["judge"]),
        make_run(dataset, scorers=["judge"]),
    )
    items = list(dataset.items.order_by("index")[:2])
    for item, (before, after) in zip(items, [(0.0, 0.217), (0.203, 0.42)], strict=True):
        add_result(baseline, item, {"judge": before})
        add_result(candidate, item, {"judge": after})

    values, counts = compare.paired_differences(
        baseline=finish(baseline),
        candidate=finish(candidate),
        scorer="judge",
        paired_by="item",
        column="total",
    )

    assert values.tolist() == [pytest.approx(0.217)]
    assert counts.tolist() == [2]


@pytest.mark.parametrize(
    ("epochs", "finished"),
    # Finished single-epoch runs pair their stored verdicts; running ones,
    # and runs of several epochs, are paired in SQL.
    [(1, True), (1, False), (2, True)],
)
def test_runs_sharing_seventy_scorers_compare_scorer_by_scorer(
    dataset, epochs: int, finished: bool
) -> None:
    # SQLite joins at most 64 tables in one query; each scorer is two joins.
    scorers = [f"s{n:02}" for n in range(70)]
    baseline = make_run(dataset, scorers=scorers, name="baseline", epochs=epochs)
    candidate = make_run(dataset, scorers=scorers, name="candidate", epochs=epochs)
    items = list(dataset.items.order_by("index")[:3])
    for epoch in range(epochs):
        for position, item in enumerate(items):
            # Scorer n: the candidate passes item 0 when n is even (an
            # improvement); both pass the others.
            add_result(baseline, item, dict.fromkeys(scorers, 1.0 if position else 0.0),
                       epoch=epoch)  # fmt: skip
            add_result(
                candidate,
                item,
                {
                    name: 1.0 if position or n % 2 == 0 else 0.0
                    for n, name in enumerate(scorers)
                },
                epoch=epoch,
            )
    if finished:
        baseline, candidate = finish(baseline), finish(candidate)

    rows = compare.compare_runs(baseline=baseline, candidates=[candidate]).scorers

    assert [row.scorer for row in rows] == scorers
    assert [row.improvements for row in rows] == [
        1 if n % 2 == 0 else 0 for n in range(70)
    ]
    assert {row.both_passed for row in rows} == {2}

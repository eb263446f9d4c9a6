"""A finished single-epoch run's verdicts, stored for comparisons, give the
figures the join of both runs' results gives, and are read while current."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from runs.analysis import compare, verdicts
from runs.models import Project, Run, RunStatus, RunVerdicts
from tests.comparisons import add_result, finish, make_run, paired_runs
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(project: Project):
    return make_dataset(project, arithmetic_items(120), name="verdicts")


def _mixed_runs(dataset) -> tuple[Run, Run]:
    """Two runs with passes, values, errors, failed calls, skipped scores and
    items only the baseline has."""
    scorers = ("exact_match", "judge", "careful")
    baseline = make_run(dataset, scorers=scorers)
    candidate = make_run(dataset, scorers=scorers)
    rng = np.random.default_rng(5)
    for i, item in enumerate(dataset.items.order_by("index")[:110]):
        for run in (baseline, candidate):
            if run is candidate and i % 17 == 3:
                continue
            draw = rng.random()
            if draw < 0.05:
                add_result(run, item, {"exact_match": "failed"})
                continue
            judge = "error" if draw > 0.97 else round(float(rng.uniform(0, 1)), 3)
            exact = float(rng.random() < 0.6)
            careful = float(rng.random() < 0.5) if exact == 0 else "skipped"
            add_result(
                run, item, {"exact_match": exact, "judge": judge, "careful": careful}
            )
    return baseline, candidate


def _unfinished(run: Run) -> Run:
    """The same run as a page would see it while it is still going."""
    copy = Run.objects.get(pk=run.pk)
    copy.status = RunStatus.RUNNING
    return copy


def test_stored_verdicts_give_the_figures_of_the_join(dataset) -> None:
    baseline, candidate = _mixed_runs(dataset)
    baseline, candidate = finish(baseline), finish(candidate)
    names = compare.shared_scorers(baseline, candidate)

    stored = compare.single_scan(baseline=baseline, candidate=candidate, scorers=names)
    joined = compare.single_scan(
        baseline=_unfinished(baseline),
        candidate=_unfinished(candidate),
        scorers=names,
    )

    assert RunVerdicts.objects.filter(run__in=[baseline, candidate]).count() == 2
    assert stored.keys() == joined.keys()
    for name in names:
        # Sums in another order: equal up to the last bits.
        assert dataclasses.asdict(stored[name].table) == pytest.approx(
            dataclasses.asdict(joined[name].table)
        )
        np.testing.assert_array_equal(stored[name].values, joined[name].values)
        np.testing.assert_array_equal(stored[name].counts, joined[name].counts)
    assert stored["exact_match"].table.unpaired == 7
    assert stored["careful"].table.skipped > 0


def test_an_unfinished_run_is_compared_without_storing_verdicts(dataset) -> None:
    baseline, candidate = _mixed_runs(dataset)

    compare.compare_runs(baseline=baseline, candidates=[candidate])

    assert not RunVerdicts.objects.exists()


def test_a_run_of_several_epochs_stores_no_verdicts(dataset) -> None:
    run = finish(make_run(dataset, epochs=2))

    assert verdicts.run_verdicts(run=run) is None
    assert not RunVerdicts.objects.exists()


def test_the_comparison_reads_the_stored_verdicts(dataset) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=50, regressions=10, improvements=20, both_failed=20
    )
    baseline, candidate = finish(baseline), finish(candidate)
    verdicts.run_verdicts(run=candidate)
    # Alter the stored arrays: the comparison shows them, so it read them
    # rather than the results.
    stored = verdicts.run_verdicts(run=candidate)
    states = stored.states.copy()
    states[:, 0] = verdicts.PASSED
    RunVerdicts.objects.filter(run=candidate).update(
        data=verdicts._encode(dataclasses.replace(stored, states=states))
    )

    row = compare.compare_runs(baseline=baseline, candidates=[candidate]).scorers[0]

    assert (row.regressions, row.improvements) == (0, 40)


def test_new_results_make_the_stored_verdicts_stale(dataset) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=50, regressions=10, improvements=20, both_failed=20
    )
    baseline, candidate = finish(baseline), finish(candidate)
    verdicts.run_verdicts(run=candidate)
    before = RunVerdicts.objects.get(run=candidate).version
    # A retry rewrites results in place and moves the run's revision.
    item = dataset.items.get(index=55)  # a regression: passes now
    candidate.results.filter(item=item).get().scores.update(value=1.0, passed=True)
    Run.objects.filter(pk=candidate.pk).update(revision=candidate.revision + 1)
    candidate.refresh_from_db()

    row = compare.compare_runs(baseline=baseline, candidates=[candidate]).scorers[0]

    assert (row.both_passed, row.regressions) == (51, 9)
    assert RunVerdicts.objects.get(run=candidate).version != before


def test_unreadable_verdicts_are_computed_again(dataset) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=5, regressions=1, improvements=2, both_failed=2
    )
    baseline, candidate = finish(baseline), finish(candidate)
    verdicts.run_verdicts(run=candidate)
    RunVerdicts.objects.filter(run=candidate).update(data=b"not an archive")

    row = compare.compare_runs(baseline=baseline, candidates=[candidate]).scorers[0]

    assert (row.both_passed, row.regressions, row.improvements) == (5, 1, 2)
    assert (
        verdicts._decode(RunVerdicts.objects.get(run=candidate).data, ["exact_match"])
        is not None
    )


def test_an_item_without_a_score_is_not_passed_with_value_zero(dataset) -> None:
    run = make_run(dataset)
    item = dataset.items.get(index=0)
    add_result(run, item, {"exact_match": "failed"})

    got = verdicts.run_verdicts(run=finish(run))

    assert got.items.tolist() == [item.pk]
    assert got.states.tolist() == [[0]] and got.values.tolist() == [[0.0]]

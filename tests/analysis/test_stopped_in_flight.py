"""A result stopped in flight (its call cut short because its run stopped) is
no sample: out of pass rates and pairs, counted apart; a call that ran out of
its own timeout stays a failure."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from runs.analysis import compare
from runs.analysis.summary import PASS_RATE_DEFINITION, run_summary
from runs.models import Dataset, Item, Project, Result, Run, RunStatus
from tests.comparisons import add_result, finish, make_run
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db

ITEMS = 10
IN_FLIGHT = 8
# How a run's stop closes an item in flight (executor/stops.py): a cancel,
# fail fast or the cost budget as cancelled, the deadline as a timeout of type
# Deadline. A call's own timeout is a timeout of another type.
STOPPED = {
    "cancel": (Result.Status.CANCELLED, "cancelled", "Cancelled"),
    "deadline": (Result.Status.TIMED_OUT, "timeout", "Deadline"),
}
OWN_TIMEOUT = (Result.Status.TIMED_OUT, "timeout", "Timeout")


@pytest.fixture
def ten(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(ITEMS), name="ten")


def _interrupted(
    run: Run, item: Item, outcome: tuple[str, str, str], epoch: int
) -> None:
    status, kind, error_type = outcome
    now = timezone.now()
    Result.objects.create(
        run=run,
        item=item,
        item_index=item.index,
        epoch=epoch,
        status=status,
        output=None,
        error_kind=kind,
        error_type=error_type,
        error_message="in flight when the run stopped: cancelled",
        started_at=now - timedelta(seconds=1),
        finished_at=now,
    )


def _runs(
    dataset: Dataset, outcome: tuple[str, str, str], *, epochs: int = 1, ended: bool
) -> tuple[Run, Run]:
    """A baseline that passed every item, and a candidate that passed the
    first items and left the last IN_FLIGHT with ``outcome``."""
    baseline = make_run(dataset, name="baseline", epochs=epochs)
    candidate = make_run(dataset, name="candidate", epochs=epochs)
    for item in Item.objects.filter(dataset=dataset).order_by("index"):
        for epoch in range(epochs):
            add_result(baseline, item, {"exact_match": 1.0}, epoch=epoch)
            if item.index < ITEMS - IN_FLIGHT:
                add_result(candidate, item, {"exact_match": 1.0}, epoch=epoch)
            else:
                _interrupted(candidate, item, outcome, epoch)
    if ended:
        return finish(baseline), finish(candidate)
    return baseline, candidate


def _row(baseline: Run, candidate: Run) -> compare.ScorerComparison:
    comparison = compare.compare_runs(baseline=baseline, candidates=[candidate])
    (row,) = comparison.scorers
    return row


# Ended single-epoch runs pair their stored verdicts; a running one is paired
# in SQL one result each; several epochs are grouped per item in SQL.
PATHS = [
    pytest.param({"epochs": 1, "ended": True}, id="stored-verdicts"),
    pytest.param({"epochs": 1, "ended": False}, id="sql-one-each"),
    pytest.param({"epochs": 2, "ended": True}, id="sql-epochs"),
]


@pytest.mark.parametrize("stop", sorted(STOPPED))
@pytest.mark.parametrize("path", PATHS)
def test_items_stopped_in_flight_are_no_regressions(
    ten: Dataset, stop: str, path: dict
) -> None:
    baseline, candidate = _runs(ten, STOPPED[stop], **path)

    row = _row(baseline, candidate)

    assert row.regressions == 0
    assert row.stopped == IN_FLIGHT
    assert (row.paired, row.unpaired, row.skipped) == (ITEMS - IN_FLIGHT, 0, 0)
    assert row.candidate_pass_rate == 1.0
    assert row.verdict != compare.WORSE


@pytest.mark.parametrize("path", PATHS)
def test_a_call_that_ran_out_of_its_own_timeout_is_a_regression(
    ten: Dataset, path: dict
) -> None:
    baseline, candidate = _runs(ten, OWN_TIMEOUT, **path)

    row = _row(baseline, candidate)

    assert (row.regressions, row.stopped, row.paired) == (IN_FLIGHT, 0, ITEMS)
    assert row.verdict == compare.WORSE


@pytest.mark.parametrize("stop", sorted(STOPPED))
def test_results_stopped_in_flight_leave_the_pass_rate_denominator(
    ten: Dataset, stop: str
) -> None:
    _, candidate = _runs(ten, STOPPED[stop], epochs=2, ended=True)

    (summary,) = run_summary(run=candidate).scorers

    assert (summary.results, summary.stopped, summary.judged) == (20, 16, 4)
    assert summary.passed == 4 and summary.failed == 0
    assert summary.pass_rate == 1.0
    # pass@k over the items with results that are samples: the first two.
    assert summary.pass_at_k == {1: 1.0, 2: 1.0}
    assert "results - skipped - stopped" in PASS_RATE_DEFINITION


def test_a_call_that_ran_out_of_its_own_timeout_stays_in_the_denominator(
    ten: Dataset,
) -> None:
    _, candidate = _runs(ten, OWN_TIMEOUT, ended=True)

    (summary,) = run_summary(run=candidate).scorers

    assert (summary.stopped, summary.judged, summary.failed) == (0, ITEMS, IN_FLIGHT)
    assert summary.pass_rate == pytest.approx(0.2)


def test_api_and_pages_count_stopped_items_apart(
    alice_client: Client, ten: Dataset
) -> None:
    baseline, candidate = _runs(ten, STOPPED["cancel"], ended=True)
    Run.objects.filter(pk=candidate.pk).update(status=RunStatus.CANCELLED)

    summary = alice_client.get(f"/api/v1/runs/{candidate.pk}/summary").json()
    (scorer,) = summary["scorers"]
    assert (scorer["stopped"], scorer["pass_rate"]) == (IN_FLIGHT, 1.0)
    assert "stopped" in summary["definition"]
    query = f"baseline={baseline.pk}&candidates={candidate.pk}"
    compared = alice_client.get(f"/api/v1/compare?{query}").json()
    row = compared["scorers"][0]
    assert (row["stopped"], row["regressions"]) == (IN_FLIGHT, 0)
    assert row["verdict"] != "worse"

    page = alice_client.get(f"/runs/{candidate.pk}/").content.decode()
    assert f"stopped in flight: {IN_FLIGHT}" in page
    compare_page = alice_client.get(f"/compare/?{query}").content.decode()
    assert f"stopped in flight: {IN_FLIGHT}" in compare_page

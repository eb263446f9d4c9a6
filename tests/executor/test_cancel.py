from __future__ import annotations

import pytest

from runs.models import Result, Run, RunStatus
from runs.results.services import run_cancel, run_launch
from tests.executor.conftest import wait_for
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)


def slow_after(count: int, fast: int) -> list[dict]:
    items = arithmetic_items(count)
    for row in items[fast:]:
        row["input"] += "[[latency:20000]]"
    return items


def test_cancel_keeps_finished_results_and_closes_in_flight_requests(
    make_run, fake_openai
):
    run = make_run(slow_after(40, fast=10), concurrency=4)
    run_launch(run=run)
    wait_for(lambda: Result.objects.filter(run=run).count() == 10)
    wait_for(lambda: fake_openai.stats.in_flight == 4)

    run_cancel(run=run)
    wait_for(lambda: Run.objects.get(pk=run.pk).is_final)

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert (run.succeeded, run.cancelled, run.skipped) == (10, 4, 26)
    assert run.processed + run.skipped == run.total == 40
    cancelled = Result.objects.filter(run=run, status=Result.Status.CANCELLED)
    assert all(r.attempts[-1]["outcome"] == "cancelled" for r in cancelled)
    # The server saw the four in-flight requests closed, not answered.
    wait_for(lambda: fake_openai.stats.disconnects == 4)


def test_cancelling_twice_is_harmless(make_run):
    run = make_run(slow_after(6, fast=0), concurrency=2)
    run_launch(run=run)
    wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING)
    run_cancel(run=run)
    run_cancel(run=run)
    wait_for(lambda: Run.objects.get(pk=run.pk).is_final)
    run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.processed + run.skipped == run.total


def test_cancelling_a_run_no_executor_claimed_ends_it_at_once(make_run):
    run = make_run(arithmetic_items(3))
    run_cancel(run=run)
    run.refresh_from_db()
    assert (run.status, run.skipped) == (RunStatus.CANCELLED, 3)


def test_evalcancel_command_cancels_a_run(make_run, fake_openai):
    from django.core.management import call_command

    run = make_run(slow_after(8, fast=2), concurrency=2)
    run_launch(run=run)
    wait_for(lambda: Result.objects.filter(run=run).count() == 2)
    call_command("evalcancel", str(run.pk))
    wait_for(lambda: Run.objects.get(pk=run.pk).is_final)
    run.refresh_from_db()
    assert (run.status, run.succeeded) == (RunStatus.CANCELLED, 2)

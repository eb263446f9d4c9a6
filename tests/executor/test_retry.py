"""Retrying results inside the same run: rows reused, attempts appended."""

from __future__ import annotations

import asyncio

import pytest

from runs.errors import Conflict, Forbidden
from runs.executor import store
from runs.executor.engine import execute_run
from runs.models import Result, Run, RunStatus, Score
from runs.results.services import run_cancel, run_launch
from runs.retry.services import run_retry
from tests.executor.conftest import wait_for
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)


def execute(run: Run, **kwargs) -> str | None:
    status = asyncio.run(execute_run(run.pk, **kwargs))
    run.refresh_from_db()
    return status


def flaky(count: int, indexes: set[int]) -> list[dict]:
    """Items whose first request gets a 500 and every later one an answer."""
    items = arithmetic_items(count)
    for index in indexes:
        items[index]["input"] += "[[flaky:1]]"
    return items


def ended_with_failures(
    make_run, count: int = 6, failing: frozenset[int] = frozenset({1, 3}), **options
) -> Run:
    run = make_run(flaky(count, set(failing)), max_attempts=1, **options)
    execute(run)
    assert (run.is_final, run.failed) == (True, len(failing))
    return run


def balanced(run: Run) -> bool:
    run.refresh_from_db()
    return run.processed + run.skipped == run.total


def test_retry_rewrites_the_same_rows_which_now_succeed(make_run):
    run = ended_with_failures(make_run)
    before = dict(Result.objects.filter(run=run).values_list("item_index", "pk"))

    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    assert execute(run) == RunStatus.COMPLETED

    after = dict(Result.objects.filter(run=run).values_list("item_index", "pk"))
    assert after == before
    assert (run.succeeded, run.failed, run.total) == (6, 0, 6)
    assert balanced(run)


def test_retry_appends_new_attempts_to_the_attempt_log(make_run):
    run = ended_with_failures(make_run)
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)

    attempts = Result.objects.get(run=run, item_index=1).attempts
    assert [(a["outcome"], a.get("round", 0)) for a in attempts] == [
        ("error", 0),
        ("ok", 1),
    ]
    untouched = Result.objects.get(run=run, item_index=0).attempts
    assert [a.get("round", 0) for a in untouched] == [0]


def test_retry_replaces_the_scores_of_a_rewritten_result(make_run):
    run = ended_with_failures(make_run)
    result = Result.objects.get(run=run, item_index=1)
    assert not Score.objects.filter(result=result).exists()  # the call failed
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)
    assert list(Score.objects.filter(result=result).values_list("passed", flat=True))
    assert Score.objects.filter(result__run=run).count() == 6


def test_retry_changes_the_results_version(make_run):
    run = ended_with_failures(make_run)
    version = run.results_version
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    run.refresh_from_db()
    pending_version = run.results_version
    execute(run)
    assert len({version, pending_version, run.results_version}) == 3


def test_retry_takes_the_chosen_results_out_of_the_counts_until_rewritten(make_run):
    run = ended_with_failures(make_run)
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    run.refresh_from_db()
    assert (run.status, run.failed, run.pending) == (RunStatus.PENDING, 0, 2)
    assert run.finished_at is None and run.error == ""
    assert Result.objects.filter(run=run, retry_pending=True).count() == 2


def test_a_retry_that_fails_again_still_keeps_one_result_per_item(make_run):
    items = arithmetic_items(3)
    items[2]["input"] += "[[status:500]]"
    run = make_run(items, max_attempts=1)
    execute(run)
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)

    rows = Result.objects.filter(run=run, item_index=2)
    assert rows.count() == 1
    assert len(rows.get().attempts) == 2
    assert (run.status, run.failed, run.succeeded) == (
        RunStatus.COMPLETED_WITH_ERRORS,
        1,
        2,
    )
    assert Result.objects.filter(run=run).count() == 3


def test_plan_counts_items_results_and_calls(make_run):
    items = arithmetic_items(5)
    for index in (0, 4):
        items[index]["input"] += "[[status:503]]"
    run = make_run(items, max_attempts=3)
    execute(run)

    plan = run_retry(run=run, user=None, statuses=["failed"], dry_run=True)
    assert (plan.items, plan.results, plan.rewrites, plan.missing) == (2, 2, 2, 0)
    assert plan.calls == 6  # two results, up to three attempts each


def test_dry_run_changes_and_launches_nothing(make_run, fake_openai):
    run = ended_with_failures(make_run)
    requests, version = fake_openai.stats.requests, run.results_version

    plan = run_retry(run=run, user=None, statuses=["failed"], dry_run=True)

    run.refresh_from_db()
    assert (plan.items, plan.started, plan.launched) == (2, False, False)
    assert run.status == RunStatus.COMPLETED_WITH_ERRORS
    assert run.results_version == version
    assert not Result.objects.filter(run=run, retry_pending=True).exists()
    assert fake_openai.stats.requests == requests


def test_retry_is_refused_while_the_run_is_executing(make_run):
    run = make_run(arithmetic_items(2))  # pending: not ended
    with pytest.raises(Conflict, match="still pending"):
        run_retry(run=run, user=None, statuses=["failed"])


def test_a_viewer_cannot_retry(make_run, victor):
    run = ended_with_failures(make_run)
    with pytest.raises(Forbidden):
        run_retry(run=run, user=victor, statuses=["failed"], dry_run=True)


def test_cancel_mid_retry_keeps_every_result(make_run, fake_openai):
    run = ended_with_failures(
        make_run, count=8, failing=frozenset(range(8)), concurrency=4
    )
    fake_openai.latency_ms = 20_000  # the retried calls hang until cancelled
    run = run_retry(run=run, user=None, statuses=["failed"]).run
    wait_for(lambda: fake_openai.stats.in_flight == 4)  # the run's concurrency

    run_cancel(run=run)
    wait_for(lambda: Run.objects.get(pk=run.pk).is_final)

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert Result.objects.filter(run=run).count() == 8
    assert not Result.objects.filter(run=run, retry_pending=True).exists()
    # Those in flight are now cancelled; the rest kept their previous outcome.
    assert (run.cancelled, run.failed, run.skipped) == (4, 4, 0)
    assert balanced(run)


def test_cancelling_a_retry_no_executor_started_restores_the_counts(make_run):
    run = ended_with_failures(make_run)
    plan = run_retry(run=run, user=None, statuses=["failed"], launch=False)
    run_cancel(run=plan.run)
    run.refresh_from_db()
    assert (run.status, run.failed, run.succeeded) == (RunStatus.CANCELLED, 2, 4)
    assert not Result.objects.filter(run=run, retry_pending=True).exists()


def test_resuming_a_cancelled_run_runs_only_its_skipped_items(make_run, fake_openai):
    run = make_run(flaky(10, {1}), max_attempts=1)
    assert execute(run, index_range=(0, 4)) == RunStatus.RUNNING
    store.run_finish(run.pk, cancelled=True)
    run.refresh_from_db()
    assert (run.status, run.failed, run.skipped) == (RunStatus.CANCELLED, 1, 6)
    requests = fake_openai.stats.requests

    plan = run_retry(run=run, user=None, statuses=["skipped"], launch=False)
    assert (plan.items, plan.rewrites, plan.missing) == (6, 0, 6)
    execute(run)

    assert fake_openai.stats.requests - requests == 6
    assert (run.succeeded, run.failed, run.skipped) == (9, 1, 0)
    assert run.status == RunStatus.COMPLETED_WITH_ERRORS


def test_the_executor_reports_items_in_flight_with_its_heartbeat(make_run, fake_openai):
    fake_openai.latency_ms = 20_000
    run = make_run(arithmetic_items(10), concurrency=3)
    run_launch(run=run)
    wait_for(lambda: Run.objects.get(pk=run.pk).in_flight == 3)
    assert Run.objects.get(pk=run.pk).in_flight_now == 3
    run_cancel(run=run)
    wait_for(lambda: Run.objects.get(pk=run.pk).is_final)
    assert Run.objects.get(pk=run.pk).in_flight_now == 0

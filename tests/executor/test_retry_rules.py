"""What a retry may run again, what it keeps, and what it records."""

from __future__ import annotations

import asyncio

import pytest

from runs.analysis.cluster_keys import score_cluster_key
from runs.errors import InvalidInput
from runs.executor import store
from runs.executor.engine import execute_run
from runs.models import Result, RetryPass, Run, RunStatus, Score
from runs.records import rows
from runs.records.signatures import score_signature
from runs.results.services import run_cancel
from runs.retry.services import run_retry
from tests.factories import arithmetic_items, store_outcomes

pytestmark = pytest.mark.django_db(transaction=True)

PASSED = {"scores": [("exact_match", True, "")]}
WRONG = {"scores": [("exact_match", False, "expected 3, got 4")]}
SCORER_ERROR = {"scores": [("exact_match", None, "", "TimeoutError: scorer")]}
CALL_ERROR = {"error": ("transient", "HTTPStatusError", "500 from upstream")}


def execute(run: Run) -> str | None:
    status = asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    return status


def ended(make_run, outcomes: list[dict], *, marker: str = "", **options) -> Run:
    """A run whose results are ``outcomes`` (one per item), ended."""
    run = make_run(arithmetic_items(len(outcomes), marker=marker), **options)
    store_outcomes(run, outcomes)
    store.run_finish(run.pk, cancelled=False)
    run.refresh_from_db()
    return run


def errored_scores(run: Run, **kwargs) -> object:
    """Retry the cluster of the scorer errors of SCORER_ERROR."""
    signature = score_signature(passed=None, reason="", error="TimeoutError: scorer")
    assert signature is not None
    key = score_cluster_key("exact_match", signature.signature)
    return run_retry(run=run, user=None, statuses=None, cluster=key, **kwargs)


def counts_match_rows(run: Run) -> bool:
    run.refresh_from_db()
    stored = store.run_counts(run.pk)
    return (run.succeeded, run.failed, run.timed_out, run.cancelled) == (
        stored["succeeded"],
        stored["failed"],
        stored["timed_out"],
        stored["cancelled"],
    ) and run.processed + run.skipped == run.total


def test_retry_refuses_statuses_that_choose_scored_answers(make_run):
    run = ended(make_run, [PASSED, WRONG, CALL_ERROR])
    with pytest.raises(InvalidInput, match="answered and scored") as caught:
        run_retry(run=run, user=None, statuses=["succeeded", "failed"])
    assert caught.value.field == "statuses"
    assert not Result.objects.filter(run=run, retry_pending=True).exists()
    assert not RetryPass.objects.filter(run=run).exists()


def test_retry_refuses_a_cluster_of_failing_scores(make_run):
    run = ended(make_run, [PASSED, WRONG, WRONG])
    signature = score_signature(passed=False, reason="expected 3, got 4", error="")
    assert signature is not None
    key = score_cluster_key("exact_match", signature.signature)
    with pytest.raises(InvalidInput, match="never draws an answer") as caught:
        run_retry(run=run, user=None, statuses=None, cluster=key, dry_run=True)
    assert caught.value.field == "cluster"


def test_retry_takes_answers_whose_every_score_errored(make_run):
    run = ended(make_run, [PASSED, SCORER_ERROR, CALL_ERROR])
    assert errored_scores(run, launch=False).rewrites == 1
    execute(run)
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    assert execute(run) == RunStatus.COMPLETED
    answer = Result.objects.get(run=run, item_index=1)
    assert list(answer.scores.values_list("passed", flat=True)) == [True]
    assert (run.retry_replaced, run.retry_replaced_answers) == (2, 1)


def test_a_marked_scored_answer_is_never_replaced(make_run):
    # Marked as an earlier version's retry would have: the writer keeps it.
    run = ended(make_run, [PASSED, WRONG])
    rows.retry_mark(Result.objects.filter(run=run))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.PENDING, heartbeat_at=None)
    execute(run)

    wrong = Result.objects.get(run=run, item_index=1)
    assert (wrong.status, wrong.output) == ("succeeded", "answer 1")
    assert list(wrong.scores.values_list("passed", flat=True)) == [False]
    assert [a["number"] for a in wrong.attempts] == [1, 2]
    assert run.retry_replaced == 0
    assert counts_match_rows(run)


def test_a_failed_retry_keeps_the_answer_it_was_to_improve(make_run):
    run = ended(
        make_run, [PASSED, SCORER_ERROR], marker="[[status:500]]", max_attempts=1
    )
    errored_scores(run, launch=False)
    execute(run)

    kept = Result.objects.get(run=run, item_index=1)
    assert (kept.status, kept.output) == ("succeeded", "answer 1")
    assert Score.objects.filter(result=kept).exclude(error="").count() == 1
    assert [a.get("round", 0) for a in kept.attempts] == [0, 1]
    assert run.retry_replaced == 0
    (retry,) = RetryPass.objects.filter(run=run)
    assert (retry.results, retry.replaced, retry.kept) == (1, 0, 1)
    assert counts_match_rows(run)


def test_an_error_retried_into_another_error_keeps_the_newest(make_run):
    run = ended(make_run, [CALL_ERROR], marker="[[status:503]]", max_attempts=1)
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)
    result = Result.objects.get(run=run)
    assert "503" in result.error_message
    assert run.retry_replaced == 1 and run.retry_replaced_answers == 0


def test_attempt_numbers_go_on_counting_across_retries(make_run):
    items = arithmetic_items(1, marker="[[status:500]]")
    run = make_run(items, max_attempts=1)
    execute(run)
    for _ in range(2):
        run_retry(run=run, user=None, statuses=["failed"], launch=False)
        execute(run)
    attempts = Result.objects.get(run=run).attempts
    assert [(a["number"], a.get("round", 0)) for a in attempts] == [
        (1, 0),
        (2, 1),
        (3, 2),
    ]


def test_a_retry_keeps_the_runs_first_timing_and_records_its_own(make_run):
    items = arithmetic_items(4)
    items[2]["input"] += "[[flaky:1]]"
    run = make_run(items, max_attempts=1)
    execute(run)
    first = (run.started_at, run.finished_at, run.wall_seconds)

    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)

    assert (run.started_at, run.finished_at, run.wall_seconds) == first
    (retry,) = RetryPass.objects.filter(run=run)
    assert retry.status == RunStatus.COMPLETED
    assert retry.started_at is not None and retry.finished_at is not None
    assert retry.started_at >= first[1]
    assert retry.seconds is not None
    assert (retry.results, retry.replaced, retry.redrawn, retry.kept) == (1, 1, 0, 0)
    assert counts_match_rows(run)


def test_cancelling_a_retry_no_executor_started_ends_its_pass(make_run):
    run = ended(make_run, [PASSED, CALL_ERROR])
    finished = run.finished_at
    plan = run_retry(run=run, user=None, statuses=["failed"], launch=False)
    run_cancel(run=plan.run)
    run.refresh_from_db()
    assert run.finished_at == finished
    (retry,) = RetryPass.objects.filter(run=run)
    assert retry.status == RunStatus.CANCELLED and not retry.active
    assert counts_match_rows(run)

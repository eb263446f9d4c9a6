from __future__ import annotations

import asyncio

import pytest

from runs.executor.engine import execute_run
from runs.models import ErrorKind, Result, Run, RunStatus, Score
from runs.scorers.base import ScorerPlugin
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)


def with_marker(count: int, marks: dict[int, str]) -> list[dict]:
    items = arithmetic_items(count)
    for index, marker in marks.items():
        items[index]["input"] += marker
    return items


def result_of(run: Run, index: int) -> Result:
    return Result.objects.get(run=run, item_index=index)


async def test_run_against_local_server_stores_every_item(make_run, fake_openai):
    run = await make_run_async(make_run, arithmetic_items(30), concurrency=8)
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.COMPLETED
    assert (run.total, run.succeeded, run.processed) == (30, 30, 30)
    assert await Result.objects.filter(run=run).acount() == 30
    assert await Score.objects.filter(result__run=run, value=1.0).acount() == 30
    assert run.prompt_tokens > 0 and run.completion_tokens == 30
    assert fake_openai.stats.requests == 30


async def test_wrong_answer_is_a_success_with_a_failing_score(make_run):
    run = await make_run_async(make_run, with_marker(3, {1: "[[wrong]]"}))
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run, item_index=1)
    score = await Score.objects.aget(result=result)
    assert result.status == Result.Status.SUCCEEDED
    assert (score.value, score.passed) == (0.0, False)


async def test_transient_error_is_retried_until_it_succeeds(make_run, fake_openai):
    run = await make_run_async(
        make_run, with_marker(2, {0: "[[flaky:2]]"}), max_attempts=3
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run, item_index=0)
    assert result.status == Result.Status.SUCCEEDED
    outcomes = [(a["outcome"], a.get("http_status")) for a in result.attempts]
    assert outcomes == [("error", 500), ("error", 500), ("ok", 200)]


async def test_permanent_error_is_not_retried(make_run, fake_openai):
    run = await make_run_async(
        make_run, with_marker(2, {0: "[[status:400]]"}), max_attempts=4
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run, item_index=0)
    assert result.status == Result.Status.FAILED
    assert result.error_kind == ErrorKind.PERMANENT
    assert len(result.attempts) == 1


async def test_transient_error_stops_after_max_attempts(make_run):
    run = await make_run_async(
        make_run, with_marker(2, {1: "[[status:503]]"}), max_attempts=3
    )
    status = await execute_run(run.pk)
    result = await Result.objects.aget(run=run, item_index=1)
    assert status == RunStatus.COMPLETED_WITH_ERRORS
    assert (result.status, result.error_kind, len(result.attempts)) == (
        Result.Status.FAILED,
        ErrorKind.TRANSIENT,
        3,
    )


async def test_malformed_response_is_an_error_that_keeps_the_raw_body(make_run):
    run = await make_run_async(make_run, with_marker(2, {0: "[[malformed]]"}))
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run, item_index=0)
    assert result.status == Result.Status.FAILED
    assert result.error_type == "MalformedResponse"
    assert result.output is None
    assert '"object": "chat.completion"' in result.attempts[0]["raw_body"]


async def test_empty_completion_is_a_valid_output(make_run):
    run = await make_run_async(make_run, with_marker(1, {0: "[[empty]]"}))
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run, item_index=0)
    assert (result.status, result.output) == (Result.Status.SUCCEEDED, "")


async def test_hung_call_times_out_and_frees_its_slot(make_run, fake_openai):
    items = with_marker(6, {0: "[[hang]]"})
    run = await make_run_async(
        make_run, items, concurrency=1, timeout_seconds=0.3, max_attempts=2
    )
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    hung = await Result.objects.aget(run=run, item_index=0)
    assert status == RunStatus.COMPLETED_WITH_ERRORS
    assert (hung.status, len(hung.attempts)) == (Result.Status.TIMED_OUT, 2)
    assert [a["outcome"] for a in hung.attempts] == ["timeout", "timeout"]
    assert (run.succeeded, run.timed_out) == (5, 1)


async def test_scorer_error_is_stored_and_hides_nothing(make_run):
    items = arithmetic_items(1)
    items[0]["expected"] = "no number here"
    run = await make_run_async(make_run, items, scorers=["numeric", "exact_match"])
    await execute_run(run.pk)
    scores = {s.scorer: s async for s in Score.objects.filter(result__run=run)}
    result = await Result.objects.aget(run=run)
    assert result.output == "0"
    assert (
        scores["numeric"].value is None and "has no number" in scores["numeric"].error
    )
    assert scores["exact_match"].value == 0.0 and scores["exact_match"].error == ""


async def test_every_item_failing_fails_the_run(make_run):
    items = [
        dict(row, input=row["input"] + "[[status:404]]") for row in arithmetic_items(4)
    ]
    run = await make_run_async(make_run, items)
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert run.error == "all 4 items failed"
    assert run.failed == 4


async def test_epochs_give_one_result_per_item_and_epoch(make_run, fake_openai):
    run = await make_run_async(make_run, arithmetic_items(5), epochs=3)
    await execute_run(run.pk)
    await run.arefresh_from_db()
    keys = [
        k
        async for k in Result.objects.filter(run=run).values_list("item_index", "epoch")
    ]
    assert run.total == 15
    assert sorted(keys) == [(i, e) for i in range(5) for e in range(3)]
    assert fake_openai.stats.requests == 15


async def test_resume_executes_only_items_without_a_result(make_run, fake_openai):
    run = await make_run_async(make_run, arithmetic_items(20))
    assert await execute_run(run.pk, index_range=(0, 12)) == RunStatus.RUNNING
    assert fake_openai.stats.requests == 12
    await Run.objects.filter(pk=run.pk).aupdate(heartbeat_at=None, executor_id="")
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.COMPLETED
    assert fake_openai.stats.requests == 20
    assert await Result.objects.filter(run=run).acount() == 20
    assert run.processed + run.skipped == run.total == 20


async def test_bad_target_configuration_fails_the_run_with_a_reason(make_run):
    run = await make_run_async(make_run, arithmetic_items(2))
    run.target_config = {**run.target_config, "api_key_secret": "MISSING_KEY"}
    await run.asave()
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert "project secret MISSING_KEY may not be sent to" in run.error
    assert run.skipped == 2


async def test_a_second_executor_cannot_claim_a_live_run(make_run):
    from runs.executor import store

    run = await make_run_async(make_run, arithmetic_items(2))
    await Run.objects.filter(pk=run.pk).aupdate(executor_id="elsewhere:1:x")
    assert await execute_run(run.pk) is not None  # heartbeat never set: free
    await run.arefresh_from_db()
    assert run.is_final
    assert store.executor_is_dead("elsewhere:1:x") is False


async def make_run_async(make_run, items, **kwargs) -> Run:
    from asgiref.sync import sync_to_async

    return await sync_to_async(make_run)(items, **kwargs)


class SlowScorer(ScorerPlugin):
    kind = "slow_for_test"
    label = "Slow"

    def __init__(self, name, params):
        self.name = name

    async def score(self, *, output, item):
        await asyncio.sleep(30)


async def test_a_scorer_that_hangs_times_out_and_the_others_still_score(
    make_run, monkeypatch
):
    from runs.scorers import base

    monkeypatch.setitem(base.REGISTRY, SlowScorer.kind, SlowScorer)
    run = await make_run_async(
        make_run,
        arithmetic_items(2),
        scorers=["slow_for_test", "exact_match"],
        scorer_timeout_seconds=0.2,
    )
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    scores = [s async for s in Score.objects.filter(result__run=run)]
    slow = [s for s in scores if s.scorer == "slow_for_test"]
    exact = [s for s in scores if s.scorer == "exact_match"]
    assert [s.error for s in slow] == ["scorer exceeded 0.2 s"] * 2
    assert [s.value for s in exact] == [1.0, 1.0]

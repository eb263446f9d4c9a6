"""Each kind of failure is retried, or not, as it should be; counts always add up."""

from __future__ import annotations

import asyncio
import random
from datetime import datetime

import pytest
from asgiref.sync import sync_to_async

from runs.executor import engine
from runs.executor.engine import execute_run
from runs.models import ErrorKind, Result, Run, RunFigures, RunStatus
from runs.testing.fake_faults import FaultMix
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)


def marked(count: int, marker: str) -> list[dict]:
    return [dict(row, input=row["input"] + marker) for row in arithmetic_items(count)]


async def new_run(make_run, items, **options) -> Run:
    return await sync_to_async(make_run)(items, **options)


async def only_result(run: Run) -> Result:
    return await Result.objects.aget(run=run)


async def assert_counts_add_up(run: Run) -> None:
    await run.arefresh_from_db()
    stored = await Result.objects.filter(run=run).acount()
    assert run.processed == stored
    assert run.processed + run.skipped == run.total


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
async def test_transient_statuses_are_retried(make_run, status):
    run = await new_run(make_run, marked(1, f"[[status:{status}]]"), max_attempts=3)
    await execute_run(run.pk)
    result = await only_result(run)
    assert (result.error_kind, len(result.attempts)) == (ErrorKind.TRANSIENT, 3)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_other_client_errors_are_permanent(make_run, status):
    run = await new_run(make_run, marked(1, f"[[status:{status}]]"), max_attempts=3)
    await execute_run(run.pk)
    result = await only_result(run)
    assert (result.error_kind, len(result.attempts)) == (ErrorKind.PERMANENT, 1)
    assert result.attempts[0]["http_status"] == status


async def test_exhausted_quota_is_not_retried(make_run):
    run = await new_run(make_run, marked(1, "[[quota]]"), max_attempts=3)
    await execute_run(run.pk)
    result = await only_result(run)
    assert (result.error_kind, len(result.attempts)) == (ErrorKind.QUOTA, 1)


async def test_a_body_that_is_not_json_is_a_permanent_malformed_response(make_run):
    run = await new_run(make_run, marked(1, "[[badjson]]"), max_attempts=3)
    await execute_run(run.pk)
    result = await only_result(run)
    assert (result.error_type, result.error_kind) == ("MalformedResponse", "permanent")
    assert result.attempts[0]["raw_body"] == "{not json"


async def test_connection_errors_are_retried(project, make_run):
    run = await new_run(make_run, arithmetic_items(1), max_attempts=2)
    run.target_config = {**run.target_config, "base_url": "http://127.0.0.1:9/v1"}
    await run.asave()
    await execute_run(run.pk)
    result = await only_result(run)
    assert (result.error_kind, result.error_type) == (
        ErrorKind.TRANSIENT,
        "ClientConnectorError",
    )
    assert result.error_message == "cannot connect to 127.0.0.1:9 (connection refused)"
    assert len(result.attempts) == 2


async def test_retry_after_is_honoured_between_attempts(make_run):
    items = marked(1, "[[status:429]][[retry_after:1]]")
    run = await new_run(make_run, items, max_attempts=2)
    await execute_run(run.pk)
    first, second = (await only_result(run)).attempts
    gap = datetime.fromisoformat(second["started_at"]) - datetime.fromisoformat(
        first["finished_at"]
    )
    assert gap.total_seconds() >= 1.0


async def test_every_attempt_is_recorded_with_its_outcome(make_run):
    run = await new_run(make_run, marked(1, "[[flaky:1]]"), max_attempts=3)
    await execute_run(run.pk)
    first, second = (await only_result(run)).attempts
    assert first["outcome"] == "error" and first["error_type"] == "HTTP500"
    assert first["error_kind"] == "transient" and first["http_status"] == 500
    assert second["outcome"] == "ok" and second["latency_ms"] >= 0
    assert all(a["started_at"] <= a["finished_at"] for a in (first, second))


async def test_the_retry_budget_caps_retries_across_the_run(make_run, fake_openai):
    run = await new_run(
        make_run, marked(10, "[[status:500]]"), max_attempts=3, retry_budget=4
    )
    await execute_run(run.pk)
    attempts = [len(r.attempts) async for r in Result.objects.filter(run=run)]
    assert sum(attempts) == 10 + 4
    assert fake_openai.stats.requests == 14


async def test_fail_fast_stops_a_run_against_a_dead_target(make_run, fake_openai):
    run = await new_run(
        make_run,
        marked(200, "[[status:503]]"),
        concurrency=4,
        max_attempts=1,
        fail_fast_error_rate=0.5,
        fail_fast_min_items=10,
    )
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert run.error.startswith("stopped early:")
    assert run.skipped > 0 and fake_openai.stats.requests < 200
    await assert_counts_add_up(run)


async def test_the_run_deadline_stops_it_and_in_flight_items_time_out(make_run):
    items = arithmetic_items(23)
    for row in items[3:]:
        row["input"] += "[[latency:20000]]"
    run = await new_run(make_run, items, concurrency=4, deadline_seconds=1)
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert run.error == "the run's deadline of 1 s passed"
    assert (run.succeeded, run.timed_out, run.skipped) == (3, 4, 16)
    timed_out = Result.objects.filter(run=run, status=Result.Status.TIMED_OUT)
    assert {r.error_type async for r in timed_out} == {"Deadline"}
    await assert_counts_add_up(run)


async def test_counts_add_up_under_a_mix_of_faults(make_run, fake_openai):
    fake_openai.faults = FaultMix(
        error_500=0.1, error_429=0.1, retry_after="0", hang=0.02, malformed=0.02
    )
    # A fixed draw (5 to 7 permanent failures): unseeded, about one run in
    # fifty drew none, and the check below failed.
    fake_openai.random = random.Random(1)
    run = await new_run(
        make_run,
        arithmetic_items(150),
        concurrency=16,
        timeout_seconds=0.3,
        max_attempts=3,
    )
    await execute_run(run.pk)
    await assert_counts_add_up(run)
    keys = [
        k async for k in Result.objects.filter(run=run).values_list("item_id", "epoch")
    ]
    assert len(keys) == len(set(keys)) == 150
    assert run.failed + run.timed_out > 0 and run.succeeded > 100


async def test_a_passing_database_outage_loses_nothing(make_run, monkeypatch):
    real_write = engine.write_results
    failures = iter(range(3))

    async def flaky_write(run_id, batch):
        if next(failures, None) is not None:
            raise engine.DatabaseError("database is locked")
        return await real_write(run_id, batch)

    monkeypatch.setattr(engine, "write_results", flaky_write)
    run = await new_run(make_run, arithmetic_items(30))
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    await assert_counts_add_up(run)
    assert run.succeeded == 30


async def test_a_database_that_stays_down_fails_the_run_loudly(make_run, monkeypatch):
    async def broken_write(run_id, batch):
        raise engine.DatabaseError("disk I/O error")

    monkeypatch.setattr(engine, "write_results", broken_write)
    run = await new_run(make_run, arithmetic_items(30), storage_timeout_seconds=0.5)
    assert await execute_run(run.pk) == RunStatus.FAILED
    await run.arefresh_from_db()
    assert run.error.startswith("storage unavailable: writing")
    assert "disk I/O error" in run.error
    # Nothing was stored, so nothing is reported done.
    assert (run.processed, run.skipped) == (0, 30)


def failing(real, *, calls: set[int], message: str):
    """``real``, but its calls numbered in ``calls`` (from 0) meet a database
    that is restarting."""
    count = iter(range(1_000_000))

    async def call(*args, **kwargs):
        if next(count) in calls:
            raise engine.DatabaseError(message)
        return await real(*args, **kwargs)

    return call


async def test_a_database_restart_while_items_are_read_loses_nothing(
    make_run, monkeypatch
):
    # The first page read fails twice, then the read after that page (its
    # items in flight) once: each is retried, as a write is.
    shutting_down = "FATAL:  the database system is shutting down"
    flaky = failing(engine.load_item_page, calls={0, 1, 3}, message=shutting_down)
    monkeypatch.setattr(engine, "load_item_page", flaky)
    run = await new_run(make_run, arithmetic_items(30))
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert (status, run.error) == (RunStatus.COMPLETED, "")
    await assert_counts_add_up(run)
    assert run.succeeded == 30


async def test_items_unreadable_past_the_storage_timeout_stop_the_run_for_storage(
    make_run, monkeypatch
):
    async def broken_read(*args, **kwargs):
        raise engine.DatabaseError("connection refused")

    monkeypatch.setattr(engine, "load_item_page", broken_read)
    run = await new_run(make_run, arithmetic_items(30), storage_timeout_seconds=0.5)
    assert await execute_run(run.pk) == RunStatus.FAILED
    await run.arefresh_from_db()
    assert run.error.startswith("storage unavailable: reading items failed")
    assert "connection refused" in run.error
    assert (run.processed, run.skipped) == (0, 30)


async def test_a_database_restart_as_a_run_starts_or_ends_is_waited_out(
    make_run, monkeypatch
):
    refused = "connection refused"
    for name in ("arun_target_context", "arun_scorer_contexts", "store_figures"):
        real = getattr(engine, name)
        monkeypatch.setattr(engine, name, failing(real, calls={0}, message=refused))
    run = await new_run(make_run, arithmetic_items(5))
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert (status, run.error, run.succeeded) == (RunStatus.COMPLETED, "", 5)
    assert await RunFigures.objects.filter(run=run).aexists()


async def test_a_write_pending_when_the_last_item_finishes_is_not_lost(
    make_run, monkeypatch
):
    real_write = engine.write_results

    async def slow_write(run_id, batch):
        # The database is busy: the batch waits before it is written.
        await asyncio.sleep(0.3)
        return await real_write(run_id, batch)

    monkeypatch.setattr(engine, "write_results", slow_write)
    # Half the items finish at once and are being written when the other half,
    # slower, finish and end the run.
    items = arithmetic_items(20)
    for row in items[10:]:
        row["input"] += "[[latency:400]]"
    run = await new_run(make_run, items, concurrency=20)
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert (status, run.error) == (RunStatus.COMPLETED, "")
    await assert_counts_add_up(run)
    assert run.succeeded == 20

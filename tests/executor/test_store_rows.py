"""The executor's plain-row inserts (runs.records.rows) and its writer's pace.

Results and scores are inserted without model instances (COPY on
PostgreSQL, one INSERT ... RETURNING per chunk on SQLite): what they store
must be what the ORM stores, a duplicate must be skipped as before, and the
counts must add up.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction

from runs.executor import engine, store
from runs.executor.engine import execute_run
from runs.executor.store import ResultRecord, ScoreRecord
from runs.models import ErrorKind, Result, Run, RunStatus, Score
from runs.records import rows as records_rows
from runs.records import signatures
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
COMPARED = [
    "item_id",
    "item_index",
    "epoch",
    "status",
    "output",
    "error_kind",
    "error_type",
    "error_message",
    "error_signature",
    "error_pattern",
    "attempts",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "model",
    "started_at",
    "finished_at",
    "retry_pending",
]
SCORE_COMPARED = [
    "scorer",
    "value",
    "passed",
    "reason",
    "error",
    "reason_signature",
    "skipped",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "model",
]


def records_for(items: list[Any]) -> list[ResultRecord]:
    """Records of every shape the executor writes: answers of any JSON type,
    errors with signatures, usage, judges' scores, skipped and errored scores."""
    outputs: list[Any] = [
        "5",
        {"content": "é ✓", "tool_calls": [{"id": "c1", "args": {"x": [1, 2.5]}}]},
        None,
        ["a", None, True],
        42,
        "quote ' and \\ backslash\nnew line\ttab",
    ]
    records = []
    for n, item in enumerate(items):
        failed = n % 3 == 2
        records.append(
            ResultRecord(
                item_id=item.pk,
                item_index=item.index,
                epoch=n % 2,
                status=Result.Status.FAILED if failed else Result.Status.SUCCEEDED,
                output=None if failed else outputs[n % len(outputs)],
                attempts=[
                    {"number": 1, "outcome": "error" if failed else "ok", "n": n}
                ],
                started_at=T0 + timedelta(seconds=n),
                finished_at=T0 + timedelta(seconds=n, microseconds=n),
                error_kind=ErrorKind.TRANSIENT if failed else "",
                error_type="HTTP500" if failed else "",
                error_message=f"HTTP 500: request req_{n:08x} failed" if failed else "",
                latency_ms=None if failed else 12.5 + n,
                prompt_tokens=None if n % 4 == 0 else 10 + n,
                completion_tokens=None if n % 4 == 0 else 1,
                cost=None if n % 4 == 0 else 0.001 * n,
                model="m" * 250 if n == 1 else "gpt",
                scores=[]
                if failed
                else [
                    ScoreRecord("exact_match", 1.0, True, reason="matches '5'"),
                    ScoreRecord(
                        "judge",
                        None,
                        None,
                        reason="unparsable",
                        error=f"bad reply {n}",
                        prompt_tokens=7,
                        completion_tokens=3,
                        cost=None,
                        model="judge-model",
                    ),
                    ScoreRecord("later", None, None, reason="skipped", skipped=True),
                ],
            )
        )
    return records


def stored(run: Run) -> tuple[list[tuple], list[tuple]]:
    results = list(
        Result.objects.filter(run=run)
        .order_by("item_index", "epoch")
        .values_list(*COMPARED)
    )
    scores = list(
        Score.objects.filter(result__run=run)
        .order_by("result__item_index", "result__epoch", "scorer")
        .values_list(*SCORE_COMPARED)
    )
    return results, scores


def orm_result(run_id: int, r: ResultRecord) -> Result:
    """A result as the ORM would build it (the reference the plain rows match)."""
    error = (
        signatures.error_signature(
            kind=r.error_kind, error_type=r.error_type[:200], message=r.error_message
        )
        if signatures.result_has_error(
            status=r.status, error_kind=r.error_kind, error_type=r.error_type
        )
        else None
    )
    return Result(
        run_id=run_id,
        item_id=r.item_id,
        item_index=r.item_index,
        epoch=r.epoch,
        status=r.status,
        output=r.output,
        error_kind=r.error_kind,
        error_type=r.error_type[:200],
        error_message=r.error_message,
        error_signature=error.signature if error else "",
        error_pattern=error.pattern if error else "",
        attempts=r.attempts,
        latency_ms=r.latency_ms,
        prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens,
        cost=r.cost,
        model=r.model[:200],
        started_at=r.started_at,
        finished_at=r.finished_at,
    )


def orm_score(result_id: int, s: ScoreRecord) -> Score:
    signature = signatures.score_signature(
        passed=s.passed, reason=s.reason, error=s.error
    )
    return Score(
        result_id=result_id,
        scorer=s.scorer,
        value=s.value,
        passed=s.passed,
        reason=s.reason,
        error=s.error,
        reason_signature=signature.signature if signature else "",
        skipped=s.skipped,
        prompt_tokens=s.prompt_tokens,
        completion_tokens=s.completion_tokens,
        cost=s.cost,
        model=s.model[:200],
    )


def orm_write(run: Run, records: list[ResultRecord]) -> None:
    """The same records through the ORM, as the executor stored them before."""
    with transaction.atomic():
        rows = Result.objects.bulk_create([orm_result(run.pk, r) for r in records])
        Score.objects.bulk_create(
            [
                orm_score(row.pk, s)
                for row, r in zip(rows, records, strict=True)
                for s in r.scores
            ]
        )


def test_plain_rows_store_exactly_what_the_orm_stores(make_run):
    items = arithmetic_items(12)
    fast_run = make_run(items)
    orm_run = make_run(items, dataset=fast_run.dataset)
    dataset_items = list(fast_run.dataset.items.order_by("index"))
    assert store.results_write(fast_run.pk, records_for(dataset_items)) == 12
    orm_write(orm_run, records_for(dataset_items))
    fast, orm = stored(fast_run), stored(orm_run)
    assert len(fast[0]) == 12 and len(fast[1]) == 8 * 3
    assert fast == orm
    # Read back as values: JSON, datetimes and truncations survived the trip.
    first = Result.objects.get(run=fast_run, item_index=1)
    assert first.output["content"] == "é ✓" and first.started_at == T0 + timedelta(
        seconds=1
    )
    assert first.model == "m" * 200
    failed = Result.objects.get(run=fast_run, item_index=2)
    expected = signatures.error_signature(
        kind=ErrorKind.TRANSIENT,
        error_type="HTTP500",
        message="HTTP 500: request req_00000002 failed",
    )
    assert (failed.error_signature, failed.error_pattern) == (
        expected.signature,
        expected.pattern,
    )
    assert Result.objects.get(run=fast_run, item_index=2).output is None
    assert Result.objects.get(run=fast_run, item_index=3).output == ["a", None, True]


def test_a_duplicate_is_skipped_and_the_counts_add_up(make_run):
    run = make_run(arithmetic_items(6))
    items = list(run.dataset.items.order_by("index"))
    records = records_for(items)
    assert store.results_write(run.pk, records[:4]) == 4
    # Written again with two new ones (another executor stored the first
    # four): only the new ones are stored, and counted.
    again = records_for(items)
    assert store.results_write(run.pk, again) == 2
    run.refresh_from_db()
    assert Result.objects.filter(run=run).count() == 6
    assert Score.objects.filter(result__run=run).count() == 4 * 3
    assert (run.succeeded, run.failed) == (4, 2)
    assert run.processed == 6
    assert run.prompt_tokens == sum(r.prompt_tokens or 0 for r in records)
    counted = store.run_counts(run.pk)
    assert counted[Result.Status.SUCCEEDED] == run.succeeded
    assert counted[Result.Status.FAILED] == run.failed


def test_a_duplicate_raises_integrity_error_from_either_insert(make_run):
    run = make_run(arithmetic_items(2))
    items = list(run.dataset.items.order_by("index"))
    records = records_for(items)
    with transaction.atomic():
        records_rows.insert_results(run.pk, records)
    with pytest.raises(IntegrityError), transaction.atomic():
        records_rows.insert_results(run.pk, records[:1])
    [result_id] = Result.objects.filter(run=run, item_index=0).values_list(
        "pk", flat=True
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        records_rows.insert_scores([(result_id, records[0].scores[0])] * 2)


def test_ids_come_back_in_the_order_of_the_records(make_run):
    run = make_run(arithmetic_items(5))
    items = list(run.dataset.items.order_by("index"))
    records = list(reversed(records_for(items)))
    with transaction.atomic():
        ids = records_rows.insert_results(run.pk, records)
    by_id = dict(Result.objects.filter(run=run).values_list("pk", "item_index"))
    assert [by_id[pk] for pk in ids] == [r.item_index for r in records]


async def test_a_full_batch_is_written_before_the_flush_interval(make_run, monkeypatch):
    # A writer that waited for its interval would leave the workers blocked
    # on a full buffer for an hour: the run ends only if full batches wake it.
    monkeypatch.setattr(engine, "FLUSH_INTERVAL", 3600.0)
    monkeypatch.setattr(engine, "FLUSH_BATCH", 5)
    sizes: list[int] = []
    write = engine.write_results

    async def counting(run_id: int, batch: list[ResultRecord]) -> int:
        sizes.append(len(batch))
        return await write(run_id, batch)

    monkeypatch.setattr(engine, "write_results", counting)
    run = await sync_to_async(make_run)(arithmetic_items(12), concurrency=1)
    async with asyncio.timeout(120):  # a hang guard, not a measure
        status = await execute_run(run.pk)
    assert status == RunStatus.COMPLETED
    assert sum(sizes) == 12
    assert sizes[:2] == [5, 5]
    assert await Result.objects.filter(run=run).acount() == 12


def test_scores_replace_stores_what_the_orm_upsert_stored(make_run):
    # A scoring pass replaces scores by (result, scorer) and adds new ones,
    # as Score.objects.bulk_create(update_conflicts=True) did before.
    items = arithmetic_items(6)
    fast_run = make_run(items)
    orm_run = make_run(items, dataset=fast_run.dataset)
    dataset_items = list(fast_run.dataset.items.order_by("index"))
    store.results_write(fast_run.pk, records_for(dataset_items))
    store.results_write(orm_run.pk, records_for(dataset_items))
    rescored = [
        ScoreRecord("exact_match", 0.0, False, reason="now differs"),
        ScoreRecord("new", 0.5, None, prompt_tokens=2, cost=0.25, model="j" * 210),
    ]
    for run in (fast_run, orm_run):
        ids = (
            Result.objects.filter(run=run)
            .order_by("item_index")
            .values_list("pk", flat=True)
        )
        pairs = [(pk, s) for pk in ids for s in rescored]
        with transaction.atomic():
            if run is fast_run:
                records_rows.scores_replace(pairs)
                records_rows.scores_replace(pairs)  # twice: the same rows
            else:
                Score.objects.bulk_create(
                    [orm_score(pk, s) for pk, s in pairs],
                    update_conflicts=True,
                    unique_fields=["result", "scorer"],
                    update_fields=list(records_rows.SCORE_VALUES),
                )
    assert stored(fast_run) == stored(orm_run)
    assert Score.objects.filter(result__run=fast_run, scorer="new").count() == 6
    changed = Score.objects.filter(result__run=fast_run, scorer="exact_match")
    assert {(s.value, s.passed, s.reason) for s in changed} == {
        (0.0, False, "now differs")
    }


def test_results_are_stored_only_in_the_transaction_of_their_counts(make_run):
    run = make_run(arithmetic_items(1))
    records = records_for(list(run.dataset.items.all()))
    with pytest.raises(RuntimeError, match="transaction"):
        records_rows.results_store(run.pk, records)
    assert not Result.objects.filter(run=run).exists()


@pytest.mark.parametrize(
    "attempt",
    [
        {
            "started_at": "2026-01-02T03:04:05.123456+00:00",
            "finished_at": "2026-01-02T03:04:07.5+00:00",
        },
        {
            "started_at": "2026-01-02T03:04:05+00:00",
            "finished_at": "2026-01-02T03:04:05+00:00",
        },
        {"started_at": "2026-01-02T03:04:05+00:00"},
        {"started_at": None, "finished_at": "2026-01-02T03:04:05+00:00"},
        {},
    ],
)
def test_one_attempts_time_to_result_is_that_of_the_general_case(attempt):
    # One attempt takes a short path; two copies of it take the general one.
    one = records_rows.time_to_result([attempt])
    assert one == records_rows.time_to_result([attempt, dict(attempt)])

"""The one writer of ``Result`` and ``Score`` rows.

Every result and score row is written here: the executor's batches
(``results_store``: new results with their scores, and results waiting for a
retry replaced in place), a retry's marking and release of the rows it runs
again, and a scoring pass's scores (``scores_replace``) and the costs they
change. What holds for the rows holds because nothing else writes them:

- one result per (run, item, epoch): a duplicate is skipped, never stored
  twice (the unique constraint makes it impossible);
- a result is reported stored (returned, then counted by the caller) only
  when its row was inserted or replaced in this transaction;
- a replaced result keeps its earlier attempts and what they used and cost,
  so the run's counts recomputed from rows match the counts added up.

New rows go in as plain tuples (``plain_rows``), without model instances:
``bulk_create`` cost about 40 µs a row, more than the rest of an item's
storage together. Callers hold the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet

from runs.models import RESULT_OUTCOME, Result, Score
from runs.records import retries, signatures, step_rows
from runs.records.plain_rows import (
    datetime_adapter,
    insert,
    json_text,
    table,
    upsert,
)

SUCCEEDED = Result.Status.SUCCEEDED

# What these functions fill, in this order; the models' other columns take
# their default.
RESULT_FIELDS = (
    "run_id",
    "item_id",
    "item_index",
    "epoch",
    *RESULT_OUTCOME,
    "error_signature",
    "error_pattern",
    "attempts",
    "latency_ms",
    "time_to_result_ms",
    "failed_attempts",
    "attempts_made",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "model",
    "started_at",
    "finished_at",
)
SCORE_FIELDS = (
    "result_id",
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
)


# Every field of a score but its keys: a replaced score keeps nothing of the old.
SCORE_VALUES = tuple(
    name for name in SCORE_FIELDS if name not in ("result_id", "scorer")
)


def _error_columns(r: Any) -> tuple[str, str, str]:
    """(error_type, error_signature, error_pattern) of a result record, as stored."""
    error_type = r.error_type[:200]
    if not signatures.result_has_error(
        status=r.status, error_kind=r.error_kind, error_type=r.error_type
    ):
        return error_type, "", ""
    error = signatures.error_signature(
        kind=r.error_kind, error_type=error_type, message=r.error_message
    )
    return error_type, error.signature, error.pattern


def _moments(attempts: Iterable[dict[str, Any]], key: str) -> list[datetime]:
    return [
        datetime.fromisoformat(a[key]) for a in attempts if isinstance(a.get(key), str)
    ]


def time_to_result(attempts: Sequence[dict[str, Any]]) -> float | None:
    """Milliseconds from the first attempt's start to the last one's end:
    failed attempts and the back-off between them included."""
    if len(attempts) == 1:  # the usual case, without the lists
        start, end = attempts[0].get("started_at"), attempts[0].get("finished_at")
        if not (isinstance(start, str) and isinstance(end, str)):
            return None
        took = datetime.fromisoformat(end) - datetime.fromisoformat(start)
        return round(took.total_seconds() * 1000, 3)
    starts, ends = _moments(attempts, "started_at"), _moments(attempts, "finished_at")
    if not starts or not ends:
        return None
    return round((max(ends) - min(starts)).total_seconds() * 1000, 3)


def failed_attempts(attempts: Sequence[dict[str, Any]]) -> int:
    """Attempts that failed (they carry an error kind), retried or not."""
    if len(attempts) == 1:  # the usual case, without a generator
        return 1 if attempts[0].get("error_kind") else 0
    return sum(bool(attempt.get("error_kind")) for attempt in attempts)


def outcome_round(attempts: list[dict[str, Any]], status: str) -> list[dict[str, Any]]:
    """The attempts of the execution (round) that gave a stored log's outcome:
    an answer's is the round of its last answered attempt, any other's the
    last round. A retried result's rounds may be days apart: its time to
    result is the time of one round."""
    rounds = [attempt.get("round", 0) for attempt in attempts]
    answered = [
        number
        for number, attempt in zip(rounds, attempts, strict=True)
        if attempt.get("outcome") == "ok"
    ]
    last = max(rounds, default=0)
    chosen = answered[-1] if status == SUCCEEDED and answered else last
    return [a for n, a in zip(rounds, attempts, strict=True) if n == chosen]


def result_rows(run_id: int, records: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Rows of ``Result`` in ``RESULT_FIELDS`` order, then the defaults."""
    when = datetime_adapter()
    defaults = table(Result, RESULT_FIELDS).defaults
    rows = []
    for r in records:
        error_type, signature, pattern = _error_columns(r)
        rows.append(
            (
                run_id,
                r.item_id,
                r.item_index,
                r.epoch,
                r.status,
                json_text(r.output),
                r.error_kind,
                error_type,
                r.error_message,
                signature,
                pattern,
                json_text(r.attempts),
                r.latency_ms,
                time_to_result(r.attempts),
                failed_attempts(r.attempts),
                len(r.attempts),
                r.prompt_tokens,
                r.completion_tokens,
                r.cost,
                r.model[:200],
                when(r.started_at),
                when(r.finished_at),
                *defaults,
            )
        )
    return rows


def score_rows(pairs: Iterable[tuple[int, Any]]) -> list[tuple[Any, ...]]:
    """Rows of ``Score`` for (result id, score record) pairs."""
    defaults = table(Score, SCORE_FIELDS).defaults
    rows = []
    for result_id, s in pairs:
        signature = signatures.score_signature(
            passed=s.passed, reason=s.reason, error=s.error
        )
        rows.append(
            (
                result_id,
                s.scorer,
                s.value,
                s.passed,
                s.reason,
                s.error,
                signature.signature if signature else "",
                s.skipped,
                s.prompt_tokens,
                s.completion_tokens,
                s.cost,
                s.model[:200],
                *defaults,
            )
        )
    return rows


def insert_results(run_id: int, records: Sequence[Any]) -> list[int]:
    """Insert the results of ``records``; their ids, in the same order."""
    if not records:
        return []
    rows = result_rows(run_id, records)
    if connection.vendor == "postgresql":
        # COPY returns nothing: the ids are drawn first, so nothing is read
        # back. A read-back of the batch's rows by their keys is planned on
        # the table's statistics, which may predate the run (a server that
        # has not analyzed since it began): the planner then takes the run
        # for a few rows, and reads all of them for each batch (1 s at
        # 600,000 results).
        pks = _new_ids(len(rows))
        with_ids = [(pk, *row) for pk, row in zip(pks, rows, strict=True)]
        insert(table(Result, ("id", *RESULT_FIELDS)), with_ids)
        return pks
    columns = table(Result, RESULT_FIELDS)
    returning = [columns.pk_column, "item_id", "epoch"]
    ids = {
        (item_id, epoch): pk
        for pk, item_id, epoch in insert(columns, rows, returning=returning)
    }
    return [ids[(r.item_id, r.epoch)] for r in records]


def _new_ids(count: int) -> list[int]:
    """PostgreSQL: ``count`` ids from the sequence of the results' ids."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(s) FROM pg_get_serial_sequence(%s, %s) AS s, "
            "generate_series(1, %s) ORDER BY 1",
            [Result._meta.db_table, Result._meta.pk.column, count],
        )
        return [pk for (pk,) in cursor.fetchall()]


def insert_scores(pairs: Sequence[tuple[int, Any]]) -> None:
    """Insert the scores of (result id, score record) pairs."""
    if pairs:
        insert(table(Score, SCORE_FIELDS), score_rows(pairs))


def _without_stored(run_id: int, records: list[Any]) -> list[Any]:
    stored = set(
        Result.objects.filter(
            run_id=run_id, item_id__in={r.item_id for r in records}
        ).values_list("item_id", "epoch")
    )
    return [r for r in records if (r.item_id, r.epoch) not in stored]


def results_store(run_id: int, records: list[Any]) -> list[tuple[int, Any]]:
    """Store a batch of result records with their scores.

    A result waiting for a retry is replaced in place (``results_replace``);
    one already stored (by another executor of the run) is left as it is;
    the others are inserted. Returns (result id, record) for every row
    written, and only those: what the caller counts. In the caller's
    transaction, with the counts it adds.
    """
    if not connection.in_atomic_block:
        # Committed apart from the counts, a crash between them would leave
        # rows stored that the run never counted.
        raise RuntimeError("results_store runs in the transaction of its counts")
    replaced, records = results_replace(run_id, records)
    try:
        with transaction.atomic():
            ids = insert_results(run_id, records)
    except IntegrityError:
        records = _without_stored(run_id, records)
        ids = insert_results(run_id, records)
    stored = [*zip(ids, records, strict=True), *replaced]
    insert_scores([(pk, s) for pk, record in stored for s in record.scores])
    step_rows.steps_insert((pk, record.steps) for pk, record in stored if record.steps)
    return stored


def _retried_attempts(
    old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The old attempt log with the new attempts after it, marked with their round.

    Round 0 is the first execution (its attempts carry no mark); each retry of
    the result is the next round. Attempt numbers go on counting across
    rounds (1, 2, 3), so that a number names one attempt of the result.
    """
    rounds = [attempt.get("round", 0) for attempt in old]
    this_round = max(rounds, default=0) + 1
    numbers = [a["number"] for a in old if isinstance(a.get("number"), int)]
    after = max(numbers, default=len(old))
    return [
        *old,
        *(
            {**attempt, "number": after + position, "round": this_round}
            for position, attempt in enumerate(new, start=1)
        ),
    ]


def _add_earlier_usage(
    record: Any,
    prompt: int | None,
    completion: int | None,
    cost: float | None,
) -> None:
    """A replaced result keeps what its earlier attempts used and cost: they
    stay in its log, and they were paid for. An unknown part makes the whole
    cost unknown."""
    earlier_unpriced = (prompt is not None or completion is not None) and cost is None
    unpriced = earlier_unpriced or record.unpriced

    def plus(a: Any, b: Any) -> Any:
        return b if a is None else a if b is None else a + b

    record.prompt_tokens = plus(prompt, record.prompt_tokens)
    record.completion_tokens = plus(completion, record.completion_tokens)
    record.cost = None if unpriced else plus(cost, record.cost)


def results_replace(
    run_id: int, records: list[Any]
) -> tuple[list[tuple[int, Any]], list[Any]]:
    """Replace in place the results of ``records`` that wait for a retry.

    Returns (result id, record) for each row replaced, its record carrying
    the usage of the row's earlier attempts too, and the records that are
    new results. A row is replaced only while it still waits (a conditional
    UPDATE), so never twice for one retry; its old scores are deleted (the
    caller inserts the new ones).

    A row keeps its previous outcome when the retry did no better
    (``_keeps_outcome``): its new attempts go to its log and their usage to
    its own, and its record is returned with the row's status and no scores
    (what the caller counts), and keeps its steps. A replaced row's scores
    and steps are deleted (the caller inserts the new ones). What was
    replaced or kept is tallied on the run and its retry pass
    (``retries.retry_tally``).
    """
    if not Result.objects.filter(run_id=run_id, retry_pending=True).exists():
        # The usual case, answered by a partial index: nothing waits for a
        # retry, so no lookup of the batch's items.
        return [], records
    keys = {(r.item_id, r.epoch) for r in records}
    waiting = {
        (row[1], row[2]): row
        for row in Result.objects.select_for_update()
        .filter(
            run_id=run_id,
            retry_pending=True,
            item_id__in={item_id for item_id, _ in keys},
        )
        .values_list(
            "pk",
            "item_id",
            "epoch",
            "attempts",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "status",
        )
        if (row[1], row[2]) in keys
    }
    if not waiting:
        return [], records
    answered = [row[0] for row in waiting.values() if row[7] == SUCCEEDED]
    replaceable = retries.answers_retryable(answered) if answered else set()
    replaced, kept = [], []
    redrawn = 0
    for record in records:
        if (record.item_id, record.epoch) not in waiting:
            continue
        pk, _, _, attempts, prompt, completion, cost, status = waiting[
            (record.item_id, record.epoch)
        ]
        _add_earlier_usage(record, prompt, completion, cost)
        if _keeps_outcome(status, pk in replaceable, record.status):
            if _keep(pk, record, attempts):
                kept.append((pk, replace(record, status=status, scores=[], steps=None)))
        elif _replace(pk, record, attempts):
            replaced.append((pk, record))
            redrawn += status == SUCCEEDED
    Score.objects.filter(result_id__in=[pk for pk, _ in replaced]).delete()
    step_rows.steps_delete([pk for pk, _ in replaced])
    retries.retry_tally(run_id, replaced=len(replaced), redrawn=redrawn, kept=len(kept))
    new = [r for r in records if (r.item_id, r.epoch) not in waiting]
    return [*replaced, *kept], new


def _keeps_outcome(old_status: str, errored_answer: bool, new_status: str) -> bool:
    """Whether a retried row keeps its previous outcome.

    An error gives way to whatever the retry got (an answer, or the newest
    error). An answer is never overwritten by an error, and is drawn again
    only when every score of it was an error (``errored_answer``): a scored
    answer, passed or failed, stays as it is.
    """
    if old_status != SUCCEEDED:
        return False
    return not errored_answer or new_status != SUCCEEDED


def _keep(pk: int, record: Any, attempts: list[dict[str, Any]]) -> int:
    """The row keeps its outcome (and its time to result); the retry's
    attempts and usage are added."""
    log = _retried_attempts(attempts, record.attempts)
    return Result.objects.filter(pk=pk, retry_pending=True).update(
        retry_pending=False,
        attempts=log,
        failed_attempts=failed_attempts(log),
        attempts_made=len(log),
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        cost=record.cost,
    )


def _replace(pk: int, record: Any, attempts: list[dict[str, Any]]) -> int:
    """The row takes the retry's outcome, its earlier attempts kept in its log."""
    error_type, signature, pattern = _error_columns(record)
    log = _retried_attempts(attempts, record.attempts)
    return Result.objects.filter(pk=pk, retry_pending=True).update(
        retry_pending=False,
        status=record.status,
        output=record.output,
        error_kind=record.error_kind,
        error_type=error_type,
        error_message=record.error_message,
        error_signature=signature,
        error_pattern=pattern,
        attempts=log,
        latency_ms=record.latency_ms,
        time_to_result_ms=time_to_result(record.attempts),
        failed_attempts=failed_attempts(log),
        attempts_made=len(log),
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        cost=record.cost,
        model=record.model[:200],
        started_at=record.started_at,
        finished_at=record.finished_at,
    )


def retry_mark(results: QuerySet[Result]) -> int:
    """Mark ``results`` to be run again: out of the counts until replaced."""
    return results.update(retry_pending=True)


def retry_release(run_id: int) -> int:
    """Results still waiting for a retry keep their previous outcome."""
    return Result.objects.filter(run_id=run_id, retry_pending=True).update(
        retry_pending=False
    )


def scores_replace(pairs: Sequence[tuple[int, Any]]) -> None:
    """Add or replace, by scorer name, the scores of (result id, record) pairs.

    An upsert on the (result, scorer) constraint: written twice (a pass run
    again after a crash), the same rows. A replaced score keeps nothing of
    the old but its keys.
    """
    if pairs:
        upsert(
            table(Score, SCORE_FIELDS),
            score_rows(pairs),
            keys=("result_id", "scorer"),
            update=SCORE_VALUES,
        )


def result_costs_set(costs: dict[int, float | None]) -> None:
    """Set the cost of results by id (a scoring pass's judges change it)."""
    Result.objects.bulk_update(
        [Result(pk=pk, cost=cost) for pk, cost in costs.items()], ["cost"]
    )

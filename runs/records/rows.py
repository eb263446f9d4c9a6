"""Results and scores inserted as plain rows (``plain_rows``), without model
instances: ``bulk_create`` cost about 40 µs a row, more than the rest of an
item's storage together.

Called only from ``store.results_write`` (inside its transaction): a
duplicate (item, epoch) raises ``IntegrityError`` like ``bulk_create`` would,
and the caller skips what is already stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection

from runs.analysis import signatures
from runs.models import Result, Score
from runs.records.plain_rows import datetime_adapter, insert, json_text, table

# What these functions fill, in this order; the models' other columns take
# their default.
RESULT_FIELDS = (
    "run_id",
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


def result_rows(run_id: int, records: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Rows of ``Result`` in ``RESULT_FIELDS`` order, then the defaults."""
    when = datetime_adapter()
    defaults = table(Result, RESULT_FIELDS).defaults
    rows = []
    for r in records:
        error_type = r.error_type[:200]
        error = (
            signatures.error_signature(
                kind=r.error_kind, error_type=error_type, message=r.error_message
            )
            if signatures.result_has_error(
                status=r.status, error_kind=r.error_kind, error_type=r.error_type
            )
            else None
        )
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
                error.signature if error else "",
                error.pattern if error else "",
                json_text(r.attempts),
                r.latency_ms,
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
    columns = table(Result, RESULT_FIELDS)
    rows = result_rows(run_id, records)
    ids: dict[tuple[int, int], int] = {}
    if connection.vendor == "postgresql":
        insert(columns, rows)  # COPY: the ids are read back
        quote = connection.ops.quote_name
        item_ids = sorted({r.item_id for r in records})
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {quote(columns.pk_column)}, {quote('item_id')}, "
                f"{quote('epoch')} FROM {quote(columns.table)} "
                f"WHERE {quote('run_id')} = %s AND {quote('item_id')} = ANY(%s)",
                [run_id, item_ids],
            )
            keys = {(r.item_id, r.epoch) for r in records}
            for pk, item_id, epoch in cursor.fetchall():
                if (item_id, epoch) in keys:
                    ids[(item_id, epoch)] = pk
    else:
        returning = [columns.pk_column, "item_id", "epoch"]
        for pk, item_id, epoch in insert(columns, rows, returning=returning):
            ids[(item_id, epoch)] = pk
    return [ids[(r.item_id, r.epoch)] for r in records]


def insert_scores(pairs: Sequence[tuple[int, Any]]) -> None:
    """Insert the scores of (result id, score record) pairs."""
    if pairs:
        insert(table(Score, SCORE_FIELDS), score_rows(pairs))

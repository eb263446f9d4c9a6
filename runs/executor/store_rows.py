"""Results and scores inserted as plain rows, without model instances.

``bulk_create`` builds a model instance per row and compiles every value
through its field (about 40 µs a row, more than the rest of an item's storage
together). The executor writes thousands of rows a second whose values it
already knows, so here they are tuples in column order, sent in one
``INSERT ... VALUES ... RETURNING`` per chunk on SQLite and through ``COPY``
on PostgreSQL. Values are adapted as Django would (JSON text, datetimes in
the database's form); a column these functions do not fill gets its field's
default, computed once.

Called only from ``store.results_write`` (inside its transaction): a
duplicate (item, epoch) raises ``IntegrityError`` like ``bulk_create`` would,
and the caller skips what is already stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.db import connection, models

from runs.analysis import signatures
from runs.models import Result, Score

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


class Table:
    """A model's insert columns: ours first, then the defaulted ones."""

    def __init__(self, model: type[models.Model], filled: Sequence[str]) -> None:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        by_attname = {f.attname: f for f in fields}
        missing = [name for name in filled if name not in by_attname]
        if missing:
            raise LookupError(f"{model.__name__} has no column {missing[0]}")
        rest = [f for f in fields if f.attname not in filled]
        self.table = model._meta.db_table
        self.fields = [by_attname[name] for name in filled] + rest
        self.columns = [f.column for f in self.fields]
        # Defaults of the other columns, adapted once for every row.
        self.defaults = tuple(
            f.get_db_prep_save(f.get_default(), connection) for f in rest
        )
        self.pk_column = model._meta.pk.column

    def quoted(self) -> str:
        quote = connection.ops.quote_name
        return ", ".join(quote(column) for column in self.columns)


@cache
def _table(model: type[models.Model], filled: tuple[str, ...]) -> Table:
    return Table(model, filled)


def _json(value: Any) -> str:
    # As JSONField stores it (json.dumps without an encoder).
    return json.dumps(value)


def _datetime_adapter() -> Callable[[datetime], Any]:
    if connection.vendor != "sqlite":
        return lambda value: value  # the driver adapts aware datetimes
    adapt = connection.ops.adapt_datetimefield_value
    if connection.timezone is UTC or str(connection.timezone) == "UTC":

        def utc(value: datetime) -> Any:
            # What adapt_datetimefield_value gives, without its checks.
            if value.tzinfo is UTC:
                return str(value.replace(tzinfo=None))
            return adapt(value)

        return utc
    return adapt


def result_rows(run_id: int, records: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Rows of ``Result`` in ``RESULT_FIELDS`` order, then the defaults."""
    table = _table(Result, RESULT_FIELDS)
    when = _datetime_adapter()
    defaults = table.defaults
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
                None if r.output is None else _json(r.output),
                r.error_kind,
                error_type,
                r.error_message,
                error.signature if error else "",
                error.pattern if error else "",
                _json(r.attempts),
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
    defaults = _table(Score, SCORE_FIELDS).defaults
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


def _chunks(rows: list[tuple[Any, ...]], width: int) -> Iterable[list[Any]]:
    limit = connection.features.max_query_params or 65_535
    size = max(1, min(1_000, limit // width))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def _insert(
    table: Table, rows: list[tuple[Any, ...]], *, returning: Sequence[str] = ()
) -> list[tuple[Any, ...]]:
    """SQLite: the rows in multi-row INSERTs (executemany would run one
    statement a row); the ``returning`` columns of each row inserted."""
    quote = connection.ops.quote_name
    marks = "(" + ", ".join(["%s"] * len(table.columns)) + ")"
    tail = f" RETURNING {', '.join(map(quote, returning))}" if returning else ""
    returned: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        for chunk in _chunks(rows, len(table.columns)):
            cursor.execute(
                f"INSERT INTO {quote(table.table)} ({table.quoted()}) VALUES "
                + ", ".join([marks] * len(chunk))
                + tail,
                [value for row in chunk for value in row],
            )
            if returning:
                returned.extend(cursor.fetchall())
    return returned


def _copy(table: Table, rows: list[tuple[Any, ...]]) -> None:
    """PostgreSQL: the rows through COPY, errors as Django's (IntegrityError)."""
    name = connection.ops.quote_name(table.table)
    sql = f"COPY {name} ({table.quoted()}) FROM STDIN"
    with (
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(sql) as copy,
    ):
        for row in rows:
            copy.write_row(row)


def insert_results(run_id: int, records: Sequence[Any]) -> list[int]:
    """Insert the results of ``records``; their ids, in the same order."""
    if not records:
        return []
    table = _table(Result, RESULT_FIELDS)
    rows = result_rows(run_id, records)
    quote = connection.ops.quote_name
    ids: dict[tuple[int, int], int] = {}
    if connection.vendor == "postgresql":
        _copy(table, rows)
        item_ids = sorted({r.item_id for r in records})
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {quote(table.pk_column)}, {quote('item_id')}, "
                f"{quote('epoch')} FROM {quote(table.table)} "
                f"WHERE {quote('run_id')} = %s AND {quote('item_id')} = ANY(%s)",
                [run_id, item_ids],
            )
            keys = {(r.item_id, r.epoch) for r in records}
            for pk, item_id, epoch in cursor.fetchall():
                if (item_id, epoch) in keys:
                    ids[(item_id, epoch)] = pk
    else:
        returning = [table.pk_column, "item_id", "epoch"]
        for pk, item_id, epoch in _insert(table, rows, returning=returning):
            ids[(item_id, epoch)] = pk
    return [ids[(r.item_id, r.epoch)] for r in records]


def insert_scores(pairs: Sequence[tuple[int, Any]]) -> None:
    """Insert the scores of (result id, score record) pairs."""
    if not pairs:
        return
    table = _table(Score, SCORE_FIELDS)
    rows = score_rows(pairs)
    if connection.vendor == "postgresql":
        _copy(table, rows)
        return
    _insert(table, rows)

"""Rows inserted as tuples, without model instances.

``bulk_create`` builds a model instance per row and compiles every value
through its field (about 40 µs a row). Where thousands of rows a second are
written whose values are already known (an executor's results and scores, a
dataset's items), they go here as tuples in column order: one ``INSERT ...
VALUES ... RETURNING`` per chunk on SQLite, ``COPY`` on PostgreSQL. Values are
adapted as Django would (JSON text, datetimes in the database's form); a
column the caller does not fill gets its field's default, computed once per
process. So a column whose value a model instance would compute per row (a
callable default such as ``timezone.now``, ``auto_now``/``auto_now_add``, a
database default) is refused when the table is built: the caller fills it.

A duplicate under a unique constraint raises ``IntegrityError``, as
``bulk_create`` would. Callers hold the transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import cache, lru_cache
from itertools import chain
from typing import Any

from django.db import connection, models

from runs.records.json_texts import JsonText


def column(field: models.Field[Any, Any] | models.ForeignObjectRel) -> str:
    """A concrete field's column (Django's types leave it optional for others)."""
    name = getattr(field, "column", None)
    if not isinstance(name, str):
        raise TypeError(f"{field} has no column")
    return name


class Table:
    """A model's insert columns: the filled ones first, then the defaulted ones."""

    def __init__(self, model: type[models.Model], filled: Sequence[str]) -> None:
        # The primary key only when filled (ids drawn beforehand).
        fields = [
            f
            for f in model._meta.concrete_fields
            if not f.primary_key or f.attname in filled
        ]
        by_attname = {f.attname: f for f in fields}
        missing = [name for name in filled if name not in by_attname]
        if missing:
            raise LookupError(f"{model.__name__} has no column {missing[0]}")
        rest = [f for f in fields if f.attname not in filled]
        for f in rest:
            _refuse_per_row_default(model, f)
        self.table = model._meta.db_table
        self.fields = [by_attname[name] for name in filled] + rest
        self.columns = [column(f) for f in self.fields]
        # Defaults of the other columns, adapted once for every row.
        self.defaults = tuple(
            f.get_db_prep_save(f.get_default(), connection) for f in rest
        )
        self.pk_column = column(model._meta.pk)

    def quoted(self) -> str:
        quote = connection.ops.quote_name
        return ", ".join(quote(column) for column in self.columns)


def _refuse_per_row_default(
    model: type[models.Model], field: models.Field[Any, Any]
) -> None:
    """Refuse a column whose value a model instance computes for each row.

    Computed once and appended to every row, ``default=timezone.now`` would
    stamp every row with the first one's time, and ``auto_now`` fields (set
    by ``pre_save``, which plain rows skip) would be NULL. A callable default
    cannot be told apart from a pure one (``dict``, ``uuid4``...), so any is
    refused: the caller fills such a column itself, computing it per row.
    """
    name = f"{model.__name__}.{field.name}"
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        raise ValueError(
            f"{name} is set on save (auto_now/auto_now_add), which plain rows "
            "skip: fill it"
        )
    if field.has_default() and callable(field.default):
        raise ValueError(
            f"{name} has a callable default, computed per row by the ORM and "
            "only once here: fill it"
        )
    if field.has_db_default():
        raise ValueError(
            f"{name} has a database default, which a row that gives every "
            "column cannot leave to the database: fill it"
        )


@cache
def table(model: type[models.Model], filled: tuple[str, ...]) -> Table:
    return Table(model, filled)


# json.dumps's text: what a JSONField without an encoder stores.
_dumps = JsonText()


def json_text(value: Any) -> str | None:
    """A JSONField's value as stored: json.dumps without an encoder, and
    Python's None as SQL NULL."""
    return None if value is None else _dumps(value)


# The C scanner json.loads ends in, without its two whitespace matches and
# three Python calls: an executor reads three JSON columns for every item.
# (JSONDecoder sets it in __init__; its stub does not declare it.)
_scan: Callable[[str, int], tuple[Any, int]]
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def json_value(value: Any) -> Any:
    """A JSONField's stored text as the ORM reads it (``from_db_value``:
    NULL as None, text that is no JSON as it is)."""
    if isinstance(value, str):
        try:
            found, end = _scan(value, 0)
        except (StopIteration, ValueError):
            end = -1
        if end == len(value):
            return found
    elif value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def datetime_adapter() -> Callable[[datetime], Any]:
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


def _chunks(rows: list[tuple[Any, ...]], width: int) -> Iterable[list[Any]]:
    limit = connection.features.max_query_params or 65_535
    size = max(1, min(1_000, limit // width))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def insert(
    table: Table, rows: list[tuple[Any, ...]], *, returning: Sequence[str] = ()
) -> list[tuple[Any, ...]]:
    """Insert ``rows``; the ``returning`` columns of each row inserted (not on
    PostgreSQL, where COPY returns nothing: read them back)."""
    if connection.vendor == "postgresql":
        if returning:
            raise ValueError("COPY returns no columns: read them back")
        _copy(table, rows)
        return []
    return _insert_values(table, rows, returning=returning)


def upsert(
    table: Table,
    rows: list[tuple[Any, ...]],
    *,
    keys: Sequence[str],
    update: Sequence[str],
) -> None:
    """Insert ``rows``; a row whose ``keys`` (a unique constraint's columns)
    are stored already replaces its ``update`` columns instead (both
    databases: ``INSERT ... ON CONFLICT ... DO UPDATE``)."""
    quote = connection.ops.quote_name
    by_attname = {f.attname: column(f) for f in table.fields}
    assignments = ", ".join(
        f"{quote(by_attname[name])} = excluded.{quote(by_attname[name])}"
        for name in update
    )
    conflict = ", ".join(quote(by_attname[name]) for name in keys)
    _insert_values(
        table, rows, tail=f" ON CONFLICT ({conflict}) DO UPDATE SET {assignments}"
    )


def _insert_values(
    table: Table,
    rows: list[tuple[Any, ...]],
    *,
    returning: Sequence[str] = (),
    tail: str = "",
) -> list[tuple[Any, ...]]:
    """Multi-row INSERTs (executemany would run one statement a row), then
    ``tail``; the ``returning`` columns of each row inserted."""
    if (
        connection.vendor == "sqlite"
        and not connection.queries_logged
        and not connection.execute_wrappers
    ):
        # Straight to the driver; a statement that is logged or wrapped (a
        # test counting queries) goes through Django's cursor below.
        return _sqlite_insert(table, rows, returning=tuple(returning), tail=tail)
    quote = connection.ops.quote_name
    marks = "(" + ", ".join(["%s"] * len(table.columns)) + ")"
    if returning:
        tail += f" RETURNING {', '.join(map(quote, returning))}"
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


def _sqlite_insert(
    table: Table,
    rows: list[tuple[Any, ...]],
    *,
    returning: tuple[str, ...],
    tail: str,
) -> list[tuple[Any, ...]]:
    """SQLite: each chunk's statement written once in its own (qmark) style
    and run on the driver's cursor. Through Django's cursor, every statement
    of thousands of ``%s`` was rewritten by a regular expression, and its
    text built again for each chunk."""
    returned: list[tuple[Any, ...]] = []
    connection.validate_no_broken_transaction()
    with connection.cursor() as cursor, connection.wrap_database_errors:
        raw = cursor.cursor
        for chunk in _chunks(rows, len(table.columns)):
            sql = _sqlite_statement(
                table.table, tuple(table.columns), len(chunk), returning, tail
            )
            sqlite3.Cursor.execute(raw, sql, list(chain.from_iterable(chunk)))
            if returning:
                returned.extend(raw.fetchall())
    return returned


@lru_cache(maxsize=64)
def _sqlite_statement(
    name: str,
    columns: tuple[str, ...],
    count: int,
    returning: tuple[str, ...],
    tail: str,
) -> str:
    quote = connection.ops.quote_name
    marks = "(" + ", ".join(["?"] * len(columns)) + ")"
    if returning:
        tail += f" RETURNING {', '.join(map(quote, returning))}"
    return (
        f"INSERT INTO {quote(name)} ({', '.join(map(quote, columns))}) VALUES "
        + ", ".join([marks] * count)
        + tail
    )

"""A quicker flush of the test database after a transactional test.

Django empties the database after each transactional test and then sends
``post_migrate``, which makes the content types and permissions again. Two
things made that most of a second a test on PostgreSQL, hundreds of times a
pass:

- ``TRUNCATE`` of every table: PostgreSQL gives each truncated table and each
  of its indexes a new file. ``DELETE`` of a table's few rows takes next to
  nothing. Every foreign key among Django's tables is ``DEFERRABLE INITIALLY
  DEFERRED`` and none has a trigger, so the deletes, in one transaction
  (Django's ``execute_sql_flush``), leave the same empty tables; like the
  ``TRUNCATE`` without ``RESTART IDENTITY`` that they replace, they leave the
  sequences where they are. SQLite's flush already deletes.
- Content types and permissions deleted only to be made again, row for row:
  while they are as the migrations left them, they are kept (``post_migrate``
  then finds them all and adds nothing). A test that changed them has them
  deleted and made again, as Django does.

A flush that resets sequences or cascades is Django's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import pytest_django
from django.db import connection
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.postgresql.operations import (
    DatabaseOperations as PostgresOperations,
)
from django.db.backends.sqlite3.operations import (
    DatabaseOperations as SqliteOperations,
)

# Made again by post_migrate, from the models, after every flush.
MADE_BY_POST_MIGRATE = ("django_content_type", "auth_permission")


def made_by_post_migrate_as_is(ops: BaseDatabaseOperations) -> tuple[str, ...]:
    """Every row of the tables post_migrate fills, in id order."""
    with ops.connection.cursor() as cursor:
        rows = []
        for table in MADE_BY_POST_MIGRATE:
            cursor.execute(f"SELECT * FROM {ops.quote_name(table)} ORDER BY id")
            rows.append(repr(cursor.fetchall()))
    return tuple(rows)


def by_delete(ops: BaseDatabaseOperations, tables: list[str]) -> list[str]:
    # One statement, one round trip: psycopg runs a parameterless string of
    # several statements as it is.
    return [
        "SET CONSTRAINTS ALL DEFERRED; "
        + " ".join(f"DELETE FROM {ops.quote_name(table)};" for table in tables)
    ]


@contextmanager
def quick_flush(blocker: pytest_django.DjangoDbBlocker) -> Iterator[None]:
    """Transactional tests' flushes keep what post_migrate would make again
    and, on PostgreSQL, delete rows rather than files."""
    ops_class: type[BaseDatabaseOperations]
    test_database = connection.settings_dict["TEST"]["NAME"]
    if connection.settings_dict["NAME"] != test_database:
        yield  # no test reaches the database: pytest-django made none
        return
    if connection.vendor == "postgresql":
        ops_class = PostgresOperations
    elif connection.vendor == "sqlite":
        ops_class = SqliteOperations
    else:
        yield
        return
    django_flush: Callable[..., list[str]] = ops_class.sql_flush
    with blocker.unblock():
        as_migrated = made_by_post_migrate_as_is(connection.ops)

    def sql_flush(
        self: BaseDatabaseOperations,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or allow_cascade:
            return django_flush(
                self,
                style,
                tables,
                reset_sequences=reset_sequences,
                allow_cascade=allow_cascade,
            )
        if made_by_post_migrate_as_is(self) == as_migrated:
            tables = [t for t in tables if t not in MADE_BY_POST_MIGRATE]
        if not tables or self.connection.vendor != "postgresql":
            return django_flush(self, style, tables)
        return by_delete(self, tables)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ops_class, "sql_flush", sql_flush)
        yield

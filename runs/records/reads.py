"""The reads of the busiest pages, as plain SQL returning plain rows.

The ORM builds a query in several times the time the database runs it (0.3
to 1.5 ms of Python against 0.05 to 0.3 ms of SQL, bench/README.md), and it
builds three model instances per row of the runs table. The runs page and
the API's key check run on nearly every request, so they read here: each
statement is written once, scoped to the user's memberships like every
selector, and checked against its ORM twin by tests/test_hot_reads.py.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from django.contrib.auth import get_user_model
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from runs.models import (
    FINAL_RUN_STATUSES,
    HEARTBEAT_STALE_SECONDS,
    ApiKey,
    Dataset,
    Membership,
    Project,
    Run,
    RunStatus,
    ScoringPass,
)

_STATUS_LABELS = dict(RunStatus.choices)


def _aware(value: Any) -> dt.datetime | None:
    """A datetime column as the ORM returns it: aware, in UTC.

    SQLite hands back text (Django's converters are not applied to raw
    cursors); PostgreSQL an aware datetime already.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, dt.UTC)
    return value


@functools.cache
def _tables() -> dict[str, str]:
    quote = connection.ops.quote_name
    return {
        "run": quote(Run._meta.db_table),
        "project": quote(Project._meta.db_table),
        "dataset": quote(Dataset._meta.db_table),
        "membership": quote(Membership._meta.db_table),
        "apikey": quote(ApiKey._meta.db_table),
    }


# -- the runs table of the dashboard ----------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRow:
    """One row of the runs table, with what it shows that depends on the time
    of the read (``created_ago``, ``stale``) computed once, at that time: a
    cached table is keyed by exactly these values."""

    pk: int
    name: str
    status: str
    target_name: str
    target_kind: str
    total: int
    succeeded: int
    failed: int
    timed_out: int
    cancelled: int
    created_at: dt.datetime
    project_name: str
    dataset_id: int
    dataset_name: str
    dataset_version: int
    # No heartbeat for a while on a run not finished (Run.alive is False).
    stale: bool
    created_ago: str

    def __str__(self) -> str:
        return self.name or f"Run {self.pk}"

    @property
    def processed(self) -> int:
        return self.succeeded + self.failed + self.timed_out + self.cancelled

    @property
    def status_label(self) -> str:
        return _STATUS_LABELS.get(self.status, self.status)


_RUN_ROWS_SQL = """
SELECT r.id, r.name, r.status, r.target_name, r.target_kind, r.total,
       r.succeeded, r.failed, r.timed_out, r.cancelled, r.created_at,
       p.name, d.id, d.name, d.version, r.heartbeat_at
FROM {run} r
JOIN {project} p ON p.id = r.project_id
JOIN {dataset} d ON d.id = r.dataset_id
WHERE {where}
ORDER BY r.created_at DESC, r.id DESC
LIMIT %s OFFSET %s
"""
_RUN_COUNT_SQL = "SELECT COUNT(*) FROM {run} r WHERE {where}"


def _run_row(raw: Sequence[Any], now: dt.datetime) -> RunRow:
    *fields, heartbeat_at = raw
    fields[10] = created_at = _aware(fields[10])
    # Run.alive, at ``now``, for a running run (any other is never stale).
    stale = False
    if fields[2] == RunStatus.RUNNING:
        heartbeat_at = _aware(heartbeat_at)
        stale = (
            heartbeat_at is None
            or (now - heartbeat_at).total_seconds() >= HEARTBEAT_STALE_SECONDS
        )
    return RunRow(*fields, stale=stale, created_ago=naturaltime(created_at))


class RunTable:
    """The runs the user may see, newest first, optionally filtered.

    A sequence for ``Paginator``: ``count()`` and one slice, each one
    statement. The same runs as ``selectors.run_search``.
    """

    def __init__(
        self, *, user_id: int, project_id: int | None = None, status: str | None = None
    ) -> None:
        where = [
            "r.project_id IN (SELECT m.project_id FROM {membership} m"
            " WHERE m.user_id = %s)"
        ]
        params: list[Any] = [user_id]
        if project_id is not None:
            where.append("r.project_id = %s")
            params.append(project_id)
        if status:
            where.append("r.status = %s")
            params.append(status)
        self._where = " AND ".join(where).format(**_tables())
        self._params = params

    def count(self) -> int:
        sql = _RUN_COUNT_SQL.format(where=self._where, **_tables())
        with connection.cursor() as cursor:
            cursor.execute(sql, self._params)
            return cursor.fetchone()[0]

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, index: int) -> RunRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[RunRow]: ...
    def __getitem__(self, index: int | slice) -> RunRow | list[RunRow]:
        if isinstance(index, int):
            return self[index : index + 1][0]
        start, stop = index.start or 0, index.stop
        if index.step not in (None, 1) or stop is None or start < 0 or stop < start:
            raise ValueError("RunTable takes slices [start:stop] only")
        sql = _RUN_ROWS_SQL.format(where=self._where, **_tables())
        with connection.cursor() as cursor:
            cursor.execute(sql, [*self._params, stop - start, start])
            raw_rows = cursor.fetchall()
        now = timezone.now()
        return [_run_row(raw, now) for raw in raw_rows]


# -- projects, for the runs page's filter -----------------------------------------

_PROJECTS_SQL = """
SELECT p.id, p.name FROM {project} p
WHERE p.id IN (SELECT m.project_id FROM {membership} m WHERE m.user_id = %s)
ORDER BY p.name, p.id
"""


@dataclass(frozen=True, slots=True)
class ProjectChoice:
    pk: int
    name: str


def project_choices(*, user_id: int) -> list[ProjectChoice]:
    """The user's projects (id and name) by name: the runs page's filter."""
    with connection.cursor() as cursor:
        cursor.execute(_PROJECTS_SQL.format(**_tables()), [user_id])
        return [ProjectChoice(*row) for row in cursor.fetchall()]


# -- API keys -------------------------------------------------------------------


def _from_row(model: type[Any], fields: Sequence[Any], values: Sequence[Any]) -> Any:
    """``model.from_db`` on raw values, converted as the ORM would: only the
    types of the models read here (datetimes, booleans, text, ids)."""
    converted = []
    for field, value in zip(fields, values, strict=True):
        kind = field.get_internal_type()
        if kind == "DateTimeField":
            value = _aware(value)
        elif kind == "BooleanField" and value is not None:
            value = bool(value)
        converted.append(value)
    return model.from_db("default", [f.attname for f in fields], converted)


@functools.cache
def _key_with_user_sql() -> tuple[str, list[Any], list[Any]]:
    user_model = get_user_model()
    key_fields = list(ApiKey._meta.concrete_fields)
    user_fields = list(user_model._meta.concrete_fields)
    quote = connection.ops.quote_name
    columns = [f"k.{quote(f.column)}" for f in key_fields]
    columns += [f"u.{quote(f.column)}" for f in user_fields]
    sql = (
        f"SELECT {', '.join(columns)} FROM {_tables()['apikey']} k"
        f" JOIN {quote(user_model._meta.db_table)} u"
        f" ON u.{quote(user_model._meta.pk.column)} = k.{quote('user_id')}"
        " WHERE k.prefix = %s AND k.revoked_at IS NULL AND u.is_active = %s"
    )
    return sql, key_fields, user_fields


@functools.cache
def _user_sql() -> tuple[str, list[Any]]:
    user_model = get_user_model()
    quote = connection.ops.quote_name
    fields = list(user_model._meta.concrete_fields)
    columns = ", ".join(quote(f.column) for f in fields)
    sql = (
        f"SELECT {columns} FROM {quote(user_model._meta.db_table)}"
        f" WHERE {quote(user_model._meta.pk.column)} = %s"
    )
    return sql, fields


def user_by_id(user_id: Any) -> Any | None:
    """The user with this id, or None: what every signed-in request reads."""
    sql, fields = _user_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id])
        row = cursor.fetchone()
    return None if row is None else _from_row(get_user_model(), fields, row)


def api_key_with_user(prefix: str) -> ApiKey | None:
    """The active key with this prefix of an active user, its ``user`` set;
    or None. One statement (the ORM took about 1 ms of Python to build it)."""
    sql, key_fields, user_fields = _key_with_user_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [prefix, True])
        row = cursor.fetchone()
    if row is None:
        return None
    key = _from_row(ApiKey, key_fields, row[: len(key_fields)])
    key.user = _from_row(get_user_model(), user_fields, row[len(key_fields) :])
    return key


# -- the API's run list -----------------------------------------------------------

# RunFilter's fields (runs/results/schemas.py) and the column each compares.
_RUN_FILTER_COLUMNS = {
    "project": "r.project_id",
    "dataset": "r.dataset_id",
    "status": "r.status",
}


def run_records(
    *, user_id: int, filters: Mapping[str, Any], offset: int, limit: int
) -> tuple[int, list[tuple[Any, ...]]]:
    """How many runs the user may see under ``filters``, and the raw rows
    (every column of the run's table) of ``[offset:offset + limit]`` of them,
    newest first: what the API's run list shows, as values to key a cache.

    A filter without a column here is refused, not ignored: a cache keyed by
    these rows would otherwise serve one filter's page for another's.
    """
    where = [
        "r.project_id IN (SELECT m.project_id FROM {membership} m"
        " WHERE m.user_id = %s)".format(**_tables())
    ]
    params: list[Any] = [user_id]
    for name, value in filters.items():
        if name not in _RUN_FILTER_COLUMNS:
            raise ValueError(f"run filter {name!r} has no column in run_records")
        if value is not None:
            where.append(f"{_RUN_FILTER_COLUMNS[name]} = %s")
            params.append(value)
    condition = " AND ".join(where)
    run = _tables()["run"]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {run} r WHERE {condition}", params)
        count = cursor.fetchone()[0]
        cursor.execute(
            f"SELECT r.* FROM {run} r WHERE {condition}"
            " ORDER BY r.created_at DESC, r.id DESC LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        rows = [tuple(row) for row in cursor.fetchall()]
    return count, rows


# -- a finished run's page --------------------------------------------------------


_ACTIVE_PASS_STATUSES = (ScoringPass.Status.PENDING, ScoringPass.Status.RUNNING)


@functools.cache
def _run_page_sql() -> tuple[str, str]:
    user_model = get_user_model()
    quote = connection.ops.quote_name
    user_table = quote(user_model._meta.db_table)
    username = quote(user_model._meta.get_field(user_model.USERNAME_FIELD).column)
    user_pk = quote(user_model._meta.pk.column)
    tables = _tables()
    run_sql = (
        f"SELECT r.*, p.name, d.name, d.version, d.item_count, c.{username}, m.role"
        f" FROM {tables['run']} r"
        f" JOIN {tables['project']} p ON p.id = r.project_id"
        f" JOIN {tables['dataset']} d ON d.id = r.dataset_id"
        f" JOIN {tables['membership']} m"
        " ON m.project_id = r.project_id AND m.user_id = %s"
        f" LEFT JOIN {user_table} c ON c.{user_pk} = r.created_by_id"
        " WHERE r.id = %s"
    )
    passes_sql = (
        f"SELECT s.*, u.{username} FROM {quote(ScoringPass._meta.db_table)} s"
        f" LEFT JOIN {user_table} u ON u.{user_pk} = s.user_id"
        " WHERE s.run_id = %s ORDER BY s.created_at, s.id"
    )
    return run_sql, passes_sql


def run_page_state(*, user_id: int, run_id: int) -> tuple[Any, ...] | None:
    """Everything a finished run's page shows, as raw values, for its cache key;
    None when the page must be built afresh (the user is no member of the
    run's project, the run is still going, or a re-score is under way: such
    pages move by the second).

    What the page reads beyond these values is keyed by the run's own row:
    its figures and results table are cached under ``Run.results_version``,
    whose parts are columns of that row.
    """
    run_sql, passes_sql = _run_page_sql()
    with connection.cursor() as cursor:
        cursor.execute(run_sql, [user_id, run_id])
        run = cursor.fetchone()
        if run is None:
            return None
        # r.* comes first: the first "status" column is the run's.
        run_status = [column[0] for column in cursor.description].index("status")
        if run[run_status] not in FINAL_RUN_STATUSES:
            return None
        cursor.execute(passes_sql, [run_id])
        passes = [tuple(row) for row in cursor.fetchall()]
        pass_status = [column[0] for column in cursor.description].index("status")
    if any(row[pass_status] in _ACTIVE_PASS_STATUSES for row in passes):
        return None
    return tuple(run), tuple(passes)

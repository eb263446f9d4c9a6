"""ORM querysets compiled once, then run as plain statements.

The ORM builds a query in several times the time the database runs it (0.3
to 1.5 ms of Python against 0.05 to 0.3 ms of SQL, bench/README.md). A hot
read is therefore written once, as a queryset, and compiled once per process
and database vendor: its SQL, its parameters and the converters the ORM
would apply to each column are kept, and each call executes that SQL with
its own arguments and finds each column by its name in
``cursor.description``, never by its place in the statement.

A read's arguments are given to its queryset as markers (``Args``): values of
the argument's type that no caller passes, found again among the compiled
parameters and replaced by the call's values. The SQL the ORM cannot leave
open is written here and only here: a ``LIMIT %s OFFSET %s`` appended to a
sliced read (the ORM writes a slice's bounds into the SQL as numbers).

Each call costs only what it must. On SQLite the SQL is rewritten for the
driver once, at compile time, and run on the driver's connection (Django's
cursor rewrites a statement's placeholders with a regular expression on
every execution, and an ORM statement is long). On PostgreSQL the
parameters are bound by the server, on a psycopg cursor of Django's
connection: Django's cursors bind them in the client, writing every value
into the text of every statement. A query Django logs or wraps (DEBUG, a
test counting queries) goes through Django's cursor. The column names
are the ORM's, found once with the SQL (never read from a cursor: psycopg
makes an object of each column for every ``cursor.description``); so are
the arguments' positions among the parameters and, for each set of columns
to convert, their positions and converters.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX
from django.db.models import Count, QuerySet, Value
from psycopg import Cursor as ServerBindingCursor

# Markers: inside every database's integer range (a value outside it makes
# the ORM compile an empty result) and far from any id a caller passes.
_INT_MARK = -1_987_654_000
_POSITIVE_MARK = 1_987_654_000
_STR_MARK = "\x00evalsite-argument-"
_SLICE = " LIMIT %s OFFSET %s"


@dataclass(frozen=True, slots=True)
class _Arg:
    name: str


class Args:
    """Hands out one marker per named argument while a queryset is built."""

    def __init__(self) -> None:
        self.marks: dict[tuple[type, Any], str] = {}

    def _mark(self, name: str, value: Any) -> Any:
        self.marks[(type(value), value)] = name
        return value

    def integer(self, name: str) -> int:
        return self._mark(name, _INT_MARK - len(self.marks))

    def positive(self, name: str) -> int:
        """An integer compared with a positive field (an index): a negative
        marker would be left out of the SQL as outside the field's range."""
        return self._mark(name, _POSITIVE_MARK + len(self.marks))

    def text(self, name: str) -> str:
        return self._mark(name, f"{_STR_MARK}{len(self.marks)}")


Converters = tuple[list[Callable[..., Any]], Any]
# Rows as the cursor hands them, and as ``fetch`` returns them.
Row = tuple[Any, ...]


def _sqlite_sql(sql: str) -> str:
    """The statement as Django's SQLite cursor hands it to the driver."""
    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


@dataclass(frozen=True, slots=True)
class _Driver:
    """How a vendor's reads go to its DB-API driver directly."""

    # The SQL the driver takes, from the SQL Django's cursor takes.
    sql: Callable[[str], str]
    # A cursor of the driver's connection that ran the SQL with parameters.
    execute: Callable[[Any, str, list[Any]], Any]


# The vendors whose reads go to the driver directly (the others go through
# Django's cursor, which hands the SQL on as it is).
_DRIVERS: dict[str, _Driver] = {
    "sqlite": _Driver(
        _sqlite_sql, lambda driver, sql, params: driver.execute(sql, params)
    ),
    # Prepared once per connection, unless the connection prepares nothing
    # (settings: EVALSITE_DB_PREPARED).
    "postgresql": _Driver(
        str,
        lambda driver, sql, params: ServerBindingCursor(driver).execute(
            sql, params, prepare=True
        ),
    ),
}


@dataclass(frozen=True, slots=True)
class _Layout:
    """What ``fetch`` does with the rows of one cursor description: the
    position of each column to convert, its converters and expression."""

    converting: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]


@dataclass(frozen=True, slots=True)
class Statement:
    # As the ORM wrote it, for Django's cursor.
    sql: str
    # Its columns' names, as the ORM aliased them in the SQL.
    names: tuple[str, ...]
    # As the driver takes it, for a vendor in ``_DRIVERS``; else None.
    driver_sql: str | None
    # The compiled parameters: constants, and an ``_Arg`` where a call's
    # argument goes.
    params: tuple[Any, ...]
    # Where the call's arguments go among them: (position, argument name).
    slots: tuple[tuple[int, str], ...]
    arguments: frozenset[str]
    # What the ORM applies to each column's raw value, by column name.
    converters: Mapping[str, Converters]
    sliced: bool
    # By the columns to convert, found on first use.
    layouts: dict[Hashable, _Layout] = field(
        default_factory=dict, compare=False, repr=False
    )


def count_of(queryset: QuerySet[Any]) -> QuerySet[Any]:
    """``queryset.count()`` as a queryset of one row, ``{"n": count}``: a
    constant grouped by is no grouping, so COUNT runs over every row."""
    return (
        queryset.order_by()
        .annotate(_all=Value(1))
        .values("_all")
        .annotate(n=Count("pk"))
        .values("n")
    )


def _argument(args: Args, param: Any) -> Any:
    """The compiled parameter as a marker's argument, or as the constant it is."""
    if isinstance(param, int | str):
        # An integer compared with an integer field comes as psycopg's Int4
        # on PostgreSQL: an int all the same.
        name = args.marks.get((int if isinstance(param, int) else str, param))
        if name is not None:
            return _Arg(name)
    return param


def _compile(build: Callable[[Args], QuerySet[Any]], *, sliced: bool) -> Statement:
    args = Args()
    queryset = build(args)
    compiler = queryset.query.get_compiler(connection=connection)
    sql, raw_params = compiler.as_sql()
    names = [alias for _expression, _sql, alias in compiler.select]
    if None in names or len(set(names)) != len(names):
        raise ValueError(f"a compiled read needs distinct column names: {names}")
    params = tuple(_argument(args, p) for p in raw_params)
    slots = tuple(
        (position, p.name) for position, p in enumerate(params) if type(p) is _Arg
    )
    arguments = frozenset(name for _position, name in slots)
    if arguments != set(args.marks.values()):
        raise ValueError(
            f"arguments {sorted(set(args.marks.values()) - arguments)} were not"
            " compiled as parameters"
        )
    expressions = [expression for expression, _sql, _alias in compiler.select]
    converters = {
        names[position]: pair
        for position, pair in compiler.get_converters(expressions).items()
    }
    if sliced:
        sql += _SLICE
    driver = _DRIVERS.get(connection.vendor)
    return Statement(
        sql=sql,
        names=tuple(names),
        driver_sql=driver.sql(sql) if driver is not None else None,
        params=params,
        slots=slots,
        arguments=arguments,
        converters=converters,
        sliced=sliced,
    )


_STATEMENTS: dict[tuple[str, Hashable], Statement] = {}


def statement(
    key: Hashable, build: Callable[[Args], QuerySet[Any]], *, sliced: bool = False
) -> Statement:
    """The read ``key`` compiled from ``build(args)``, once per process and
    database vendor; ``key`` names the queryset's shape (the same key must
    always build the same queryset)."""
    cache_key = (connection.vendor, key)
    compiled = _STATEMENTS.get(cache_key)
    if compiled is None:
        compiled = _STATEMENTS[cache_key] = _compile(build, sliced=sliced)
    return compiled


def _execute(
    db: BaseDatabaseWrapper, read: Statement, params: list[Any]
) -> tuple[tuple[str, ...], list[Row]]:
    """The column names and the rows of the read run with these parameters."""
    if (
        read.driver_sql is not None
        and db.vendor in _DRIVERS
        and not db.queries_logged
        and not db.execute_wrappers
    ):
        # Straight to the driver, with what Django's cursor checks first; a
        # read that is logged or wrapped (a test counting queries) goes
        # through Django's cursor below.
        db.close_if_health_check_failed()
        db.ensure_connection()
        db.validate_thread_sharing()
        db.validate_no_broken_transaction()
        with db.wrap_database_errors:
            execute = _DRIVERS[db.vendor].execute
            cursor = execute(db.connection, read.driver_sql, params)
            try:
                fetched = cursor.fetchall()
            finally:
                cursor.close()
    else:
        with db.cursor() as cursor:
            cursor.execute(read.sql, params)
            # Logged or wrapped (DEBUG, a test counting queries): where the
            # columns the database describes are checked against the ORM's.
            described = tuple(column[0] for column in cursor.description)
            if described != read.names:
                raise ValueError(f"columns {described} are not {read.names}")
            fetched = cursor.fetchall()
    return read.names, fetched


def _layout(read: Statement, convert: bool | Collection[str]) -> _Layout:
    wanted = convert if isinstance(convert, bool) else tuple(convert)
    found = read.layouts.get(wanted)
    if found is None:
        columns = read.converters.keys() if wanted is True else wanted or ()
        found = read.layouts[wanted] = _Layout(
            tuple(
                (position, tuple(read.converters[name][0]), read.converters[name][1])
                for position, name in enumerate(read.names)
                if name in columns and name in read.converters
            )
        )
    return found


def fetch(
    read: Statement,
    arguments: Mapping[str, Any],
    *,
    offset: int = 0,
    limit: int | None = None,
    convert: bool | Collection[str] = True,
) -> tuple[tuple[str, ...], list[Row]]:
    """The read's column names and its rows for these arguments, the values
    as the ORM would return them; only those of the columns named in
    ``convert`` (``False``: none, as the database hands them, what a cache
    key needs; see ``converted`` for one value later)."""
    if arguments.keys() != read.arguments:
        raise TypeError(
            f"arguments {sorted(arguments)} are not {sorted(read.arguments)}"
        )
    params = list(read.params)
    for position, name in read.slots:
        params[position] = arguments[name]
    if read.sliced:
        if limit is None:
            raise TypeError("a sliced read needs a limit")
        params += (limit, offset)
    db = connections[DEFAULT_DB_ALIAS]
    names, fetched = _execute(db, read, params)
    converting = _layout(read, convert).converting
    if not converting:
        return names, fetched
    values = []
    for raw in fetched:
        row = list(raw)
        for position, converters, expression in converting:
            value = row[position]
            for converter in converters:
                value = converter(value, expression, db)
            row[position] = value
        values.append(tuple(row))
    return names, values


def converted(read: Statement, name: str, value: Any) -> Any:
    """The raw ``value`` of the read's column ``name`` as the ORM returns it."""
    converters, expression = read.converters.get(name, ((), None))
    for converter in converters:
        value = converter(value, expression, connection)
    return value


def rows(read: Statement, arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The read's rows for these arguments, each a dict by column name, with
    the values the ORM would return (a sliced read's page: ``fetch``)."""
    names, values = fetch(read, arguments)
    return [dict(zip(names, row, strict=True)) for row in values]


def one(read: Statement, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The read's first row, or None."""
    names, values = fetch(read, arguments)
    return dict(zip(names, values[0], strict=True)) if values else None

"""ORM querysets compiled once, then run as plain statements.

The ORM builds a query in several times the time the database runs it (0.3
to 1.5 ms of Python against 0.05 to 0.3 ms of SQL, bench/README.md). A hot
read is therefore written once, as a queryset, and compiled once per process
and database vendor: its SQL, its parameters and the converters the ORM
would apply to each column are kept, and each call executes that SQL with
its own arguments and maps the row by column name (``cursor.description``),
never by position.

A read's arguments are given to its queryset as markers (``Args``): values of
the argument's type that no caller passes, found again among the compiled
parameters and replaced by the call's values. The SQL the ORM cannot leave
open is written here and only here: a ``LIMIT %s OFFSET %s`` appended to a
sliced read (the ORM writes a slice's bounds into the SQL as numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, QuerySet, Value

# Markers: inside every database's integer range (a value outside it makes
# the ORM compile an empty result) and far from any id a caller passes.
_INT_MARK = -1_987_654_000
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

    def text(self, name: str) -> str:
        return self._mark(name, f"{_STR_MARK}{len(self.marks)}")


Converters = tuple[list[Callable[..., Any]], Any]


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    # The compiled parameters: constants, and an ``_Arg`` where a call's
    # argument goes.
    params: tuple[Any, ...]
    arguments: frozenset[str]
    # What the ORM applies to each column's raw value, by column name.
    converters: Mapping[str, Converters]
    sliced: bool


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
    if isinstance(param, int | str) and (type(param), param) in args.marks:
        return _Arg(args.marks[(type(param), param)])
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
    arguments = frozenset(p.name for p in params if isinstance(p, _Arg))
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
    return Statement(
        sql=sql + _SLICE if sliced else sql,
        params=params,
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


def fetch(
    read: Statement,
    arguments: Mapping[str, Any],
    *,
    offset: int = 0,
    limit: int | None = None,
    convert: bool | Collection[str] = True,
) -> tuple[tuple[str, ...], list[list[Any]]]:
    """The read's column names and its rows' values for these arguments,
    the values as the ORM would return them; only those of the columns
    named in ``convert`` (``False``: none, as the database hands them, what
    a cache key needs; see ``converted`` for one value later)."""
    if arguments.keys() != read.arguments:
        raise TypeError(
            f"arguments {sorted(arguments)} are not {sorted(read.arguments)}"
        )
    params = [arguments[p.name] if type(p) is _Arg else p for p in read.params]
    if read.sliced:
        if limit is None:
            raise TypeError("a sliced read needs a limit")
        params += [limit, offset]
    with connection.cursor() as cursor:
        cursor.execute(read.sql, params)
        names = tuple(column[0] for column in cursor.description)
        fetched = cursor.fetchall()
    wanted = read.converters.keys() if convert is True else convert or ()
    converting = [
        (position, *read.converters[name])
        for position, name in enumerate(names)
        if name in wanted and name in read.converters
    ]
    values = [list(raw) for raw in fetched]
    if converting:
        for row in values:
            for position, converters, expression in converting:
                value = row[position]
                for converter in converters:
                    value = converter(value, expression, connection)
                row[position] = value
    return names, values


def converted(read: Statement, name: str, value: Any) -> Any:
    """The raw ``value`` of the read's column ``name`` as the ORM returns it."""
    converters, expression = read.converters.get(name, ((), None))
    for converter in converters:
        value = converter(value, expression, connection)
    return value


def rows(
    read: Statement,
    arguments: Mapping[str, Any],
    *,
    offset: int = 0,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The read's rows for these arguments, each a dict by column name, with
    the values the ORM would return."""
    names, values = fetch(read, arguments, offset=offset, limit=limit)
    return [dict(zip(names, row, strict=True)) for row in values]


def one(read: Statement, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The read's first row, or None."""
    found = rows(read, arguments)
    return found[0] if found else None

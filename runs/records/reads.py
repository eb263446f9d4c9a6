"""The reads of the busiest pages, as ORM querysets compiled once.

The ORM builds a query in several times the time the database runs it (0.3
to 1.5 ms of Python against 0.05 to 0.3 ms of SQL, bench/README.md), and it
builds three model instances per row of the runs table. The runs page and
the API's key check run on nearly every request, so they read here: each
read is a queryset written once, scoped to the user's memberships like every
selector, compiled once per process (``compiled.py``) and run as a plain
statement whose rows are mapped by column name. tests/test_hot_reads.py
checks each against its ORM twin.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, overload

from django.contrib.auth import get_user_model
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.core.exceptions import ValidationError
from django.db.models import F, JSONField, QuerySet, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone

from runs.models import (
    FINAL_RUN_STATUSES,
    HEARTBEAT_STALE_SECONDS,
    RUN_COUNTS,
    ApiKey,
    Membership,
    Project,
    RetryPass,
    Run,
    RunCounts,
    RunFigures,
    RunStatus,
)
from runs.records import compiled
from runs.records.compiled import Args
from runs.records.instances import attnames, model_instance

_STATUS_LABELS = dict(RunStatus.choices)


def _member_projects(args: Args) -> QuerySet[Membership, Any]:
    """The ids of the projects of the user given as the argument ``user_id``."""
    return Membership.objects.filter(user_id=args.integer("user_id")).values(
        "project_id"
    )


def value_columns(model: type[Any]) -> tuple[list[str], dict[str, Any]]:
    """Every column of ``model`` for ``values()``: a JSON column as its text,
    which is what a cache key may hold (``<name>_json``)."""
    names: list[str] = []
    texts: dict[str, Any] = {}
    for field in model._meta.concrete_fields:
        if isinstance(field, JSONField):
            texts[f"{field.attname}_json"] = Cast(field.attname, TextField())
        else:
            names.append(field.attname)
    return names, texts


# -- the runs table of the dashboard ----------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRow(RunCounts):
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
    # Results retries replaced in place (Run.retry_replaced).
    retry_replaced: int
    revision: int
    # The version of the figures stored for the run (None: none yet): with
    # the counts, status and revision above, what its pass rates, read only
    # when the table is rendered (``run_pass_rates``), depend on.
    figures_version: str | None
    # No heartbeat for a while on a run not finished (Run.alive is False).
    stale: bool
    created_ago: str

    @property
    def status_label(self) -> str:
        return _STATUS_LABELS.get(self.status, self.status)


def _visible_runs(args: Args, filters: tuple[str, ...]) -> QuerySet[Run]:
    """The runs of the user's projects, filtered by each of ``filters`` given
    as the argument of its name: ``project``, ``dataset`` (ids), ``status``."""
    runs = Run.objects.filter(project_id__in=_member_projects(args))
    for name in filters:
        if name == "status":
            runs = runs.filter(status=args.text("status"))
        else:
            runs = runs.filter(**{f"{name}_id": args.integer(name)})
    return runs.order_by("-created_at", "-id")


_RUN_ROW_COLUMNS = (
    "id",
    "name",
    "status",
    "target_name",
    "target_kind",
    *RUN_COUNTS,
    "created_at",
    "dataset_id",
    "heartbeat_at",
    "retry_replaced",
    "revision",
)


def _run_rows(filters: tuple[str, ...]) -> compiled.Statement:
    return compiled.statement(
        ("run-table", filters),
        lambda args: _visible_runs(args, filters).values(
            *_RUN_ROW_COLUMNS,
            project_name=F("project__name"),
            dataset_name=F("dataset__name"),
            dataset_version=F("dataset__version"),
            # The stored figures' version only: their JSON is read when the
            # table is rendered, not on a cached page's every request.
            figures_version=F("figures__version"),
        ),
        sliced=True,
    )


def _run_count(filters: tuple[str, ...]) -> compiled.Statement:
    return compiled.statement(
        ("run-count", filters),
        lambda args: compiled.count_of(_visible_runs(args, filters)),
    )


# RunRow's fields read from the database, and the column of each.
_RUN_ROW_FIELDS = {
    "pk": "id",
    **{
        name: name
        for name in (
            "name",
            "status",
            "target_name",
            "target_kind",
            *RUN_COUNTS,
            "created_at",
            "project_name",
            "dataset_id",
            "dataset_name",
            "dataset_version",
            "retry_replaced",
            "revision",
            "figures_version",
        )
    },
}
# RunRow is built positionally: these fields first, in this order, then
# ``stale`` and ``created_ago`` (tests/test_hot_reads.py checks).


@functools.cache
def _run_row_positions(
    names: tuple[str, ...],
) -> tuple[operator.itemgetter[Any], int, int, int]:
    """For rows with these column names: a getter of RunRow's fields read from
    the database, in RunRow's order, and the positions of status, created_at
    and heartbeat_at."""
    fields = operator.itemgetter(*(names.index(c) for c in _RUN_ROW_FIELDS.values()))
    return (
        fields,
        names.index("status"),
        names.index("created_at"),
        names.index("heartbeat_at"),
    )


def _run_rows_read(
    read: compiled.Statement, arguments: Mapping[str, Any], *, offset: int, limit: int
) -> list[RunRow]:
    # Only created_at is converted for every row; a heartbeat only matters
    # (and is converted) for a running run.
    names, found = compiled.fetch(
        read, arguments, offset=offset, limit=limit, convert=("created_at",)
    )
    fields, status, created_at, heartbeat_at = _run_row_positions(names)
    now = timezone.now()
    rows = []
    for row in found:
        # Run.alive, at ``now``, for a running run (any other is never stale).
        stale = False
        if row[status] == RunStatus.RUNNING:
            heartbeat = compiled.converted(read, "heartbeat_at", row[heartbeat_at])
            stale = (
                heartbeat is None
                or (now - heartbeat).total_seconds() >= HEARTBEAT_STALE_SECONDS
            )
        values: tuple[Any, ...] = (
            *fields(row),
            stale,
            str(naturaltime(row[created_at])),
        )
        rows.append(RunRow(*values))
    return rows


PassRates = tuple[tuple[str, float | None], ...]


def run_pass_rates(rows: Iterable[RunRow]) -> dict[int, PassRates]:
    """Each ended run's pass rate per scorer, (scorer, rate) in its order, by
    run id, from the figures stored when it ended: one query, for a rendered
    table (a cached one is keyed by ``figures_version``). A run still going,
    or whose stored figures are not those of its results (a re-score under
    way), has none."""
    wanted = [
        row.pk
        for row in rows
        if row.figures_version and row.status in FINAL_RUN_STATUSES
    ]
    if not wanted:
        return {}
    stored = (
        RunFigures.objects.filter(run_id__in=wanted)
        .select_related("run")
        .only("version", *(f"run__{name}" for name in _VERSION_FIELDS))
        # The summary's scorers only, not the charts.
        .annotate(scorers=KT("data__summary__scorers"))
    )
    rates = {}
    for figures in stored:
        # Stored as "<format>:<results_version>" (analysis/figures.py).
        if figures.version.partition(":")[2] != figures.run.results_version:
            continue
        try:
            rates[figures.run_id] = tuple(
                (str(s["scorer"]), s["pass_rate"]) for s in json.loads(figures.scorers)
            )
        except (ValueError, TypeError, KeyError):
            continue
    return rates


# What Run.results_version is made of.
_VERSION_FIELDS = (
    "created_at",
    "revision",
    "status",
    "finished_at",
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
)


class RunTable:
    """The runs the user may see, newest first, optionally filtered.

    A sequence for ``Paginator``: ``count()`` and one slice, each one
    statement. The same runs as ``selectors.run_search``.
    """

    def __init__(
        self, *, user_id: int, project_id: int | None = None, status: str | None = None
    ) -> None:
        arguments: dict[str, Any] = {"user_id": user_id}
        if project_id is not None:
            arguments["project"] = project_id
        if status:
            arguments["status"] = status
        self._filters = tuple(name for name in arguments if name != "user_id")
        self._arguments = arguments

    def count(self) -> int:
        names, found = compiled.fetch(_run_count(self._filters), self._arguments)
        return found[0][names.index("n")] if found else 0

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
        return _run_rows_read(
            _run_rows(self._filters),
            self._arguments,
            offset=start,
            limit=stop - start,
        )


# -- projects, for the runs page's filter -----------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectChoice:
    pk: int
    name: str


def project_choices(*, user_id: int) -> list[ProjectChoice]:
    """The user's projects (id and name) by name: the runs page's filter."""
    read = compiled.statement(
        "project-choices",
        lambda args: (
            Project.objects.filter(id__in=_member_projects(args))
            .order_by("name", "id")
            .values("id", "name")
        ),
    )
    names, found = compiled.fetch(read, {"user_id": user_id})
    pk, name = names.index("id"), names.index("name")
    return [ProjectChoice(row[pk], row[name]) for row in found]


# -- the signed-in user and API keys ------------------------------------------------

# The user's columns in the key's read: under names no column of the key has.
_USER = "user__"


def user_by_id(user_id: Any) -> Any | None:
    """The user with this id, or None: what every signed-in request reads."""
    user_model = get_user_model()
    read = compiled.statement(
        "user",
        lambda args: (
            user_model._default_manager.filter(pk=args.integer("user_id"))
            .order_by()
            .values(*attnames(user_model))
        ),
    )
    try:
        user_pk = user_model._meta.pk.to_python(user_id)
    except ValidationError:
        return None
    names, found = compiled.fetch(read, {"user_id": user_pk})
    return model_instance(user_model, names, found[0]) if found else None


def _key_with_user(args: Args) -> QuerySet[ApiKey, dict[str, Any]]:
    user_fields = get_user_model()._meta.concrete_fields
    return (
        ApiKey.objects.filter(
            prefix=args.text("prefix"), revoked_at=None, user__is_active=True
        )
        .order_by()
        .values(
            *(field.attname for field in ApiKey._meta.concrete_fields),
            **{_USER + f.attname: F(f"user__{f.attname}") for f in user_fields},
        )
    )


def api_key_with_user(prefix: str) -> ApiKey | None:
    """The active key with this prefix of an active user, its ``user`` set;
    or None. One statement (the ORM took about 1 ms of Python to build it)."""
    read = compiled.statement("api-key-with-user", _key_with_user)
    names, found = compiled.fetch(read, {"prefix": prefix})
    if not found:
        return None
    key = model_instance(ApiKey, names, found[0])
    key.user = model_instance(get_user_model(), names, found[0], _USER)
    return key


# -- a run's retry passes --------------------------------------------------------

_CREATED_BY = "created_by__"


def _run_retry_passes(args: Args) -> QuerySet[RetryPass, dict[str, Any]]:
    user_fields = get_user_model()._meta.concrete_fields
    return (
        RetryPass.objects.filter(run_id=args.integer("run_id"))
        # The model's ordering, less its run (one run here), which joins runs.
        .order_by("created_at", "id")
        .values(
            *attnames(RetryPass),
            **{
                _CREATED_BY + f.attname: F(f"created_by__{f.attname}")
                for f in user_fields
            },
        )
    )


def retry_passes(*, run_id: int) -> list[RetryPass]:
    """A run's retry passes, oldest first, each with its ``created_by`` set
    (None for a pass whose author is gone). Every run page reads them: the
    ORM took about 1 ms of Python to build the statement, as long as the
    rest of a cached run page's reads."""
    read = compiled.statement("run-retry-passes", _run_retry_passes)
    names, found = compiled.fetch(read, {"run_id": run_id})
    user_model = get_user_model()
    passes = []
    for row in found:
        retry = model_instance(RetryPass, names, row)
        retry.created_by = (
            None
            if retry.created_by_id is None
            else model_instance(user_model, names, row, _CREATED_BY)
        )
        passes.append(retry)
    return passes


# -- the API's run list -----------------------------------------------------------

# RunFilter's fields (runs/results/schemas.py) that run_records filters by.
_RUN_FILTERS = ("project", "dataset", "status")
# Column names, and each row's values in their order.
KeyRows = tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]


def _run_records(filters: tuple[str, ...]) -> compiled.Statement:
    def build(args: Args) -> QuerySet[Run, dict[str, Any]]:
        names, texts = value_columns(Run)
        return _visible_runs(args, filters).values(*names, **texts)

    return compiled.statement(("run-records", filters), build, sliced=True)


def run_records(
    *, user_id: int, filters: Mapping[str, Any], offset: int, limit: int
) -> tuple[int, KeyRows]:
    """How many runs the user may see under ``filters``, and every column of
    the runs of ``[offset:offset + limit]`` of them, newest first, as the
    database hands them (JSON as its text): what the API's run list shows,
    as values to key a cache.

    A filter without a column here is refused, not ignored: a cache keyed by
    these rows would otherwise serve one filter's page for another's.
    """
    arguments: dict[str, Any] = {"user_id": user_id}
    for name, value in filters.items():
        if name not in _RUN_FILTERS:
            raise ValueError(f"run filter {name!r} has no column in run_records")
        if value is not None:
            arguments[name] = value
    given = tuple(name for name in _RUN_FILTERS if name in arguments)
    count_names, counted = compiled.fetch(_run_count(given), arguments)
    names, values = compiled.fetch(
        _run_records(given), arguments, offset=offset, limit=limit, convert=False
    )
    count = counted[0][count_names.index("n")] if counted else 0
    return count, (names, tuple(values))

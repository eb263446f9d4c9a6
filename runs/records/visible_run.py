"""A run the user may see, as the ORM reads it, in one compiled statement.

What a run's figures need (its summary, read by the API on every request):
the run's own columns, none of its project's, dataset's or creator's. Built
by the ORM, the read with its membership subquery was about half of the
summary's time; compiled once (``compiled.py``), it is a plain statement.
Scoped to the user's memberships as ``access.project_ids_where`` scopes a
view; tests/test_hot_reads.py checks it against its ORM twin.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from runs.models import Membership, Run
from runs.records import compiled
from runs.records.compiled import Args


@functools.cache
def _attnames() -> tuple[str, ...]:
    return tuple(field.attname for field in Run._meta.concrete_fields)


@functools.cache
def _in_model_order(names: tuple[str, ...]) -> operator.itemgetter[Any]:
    """A getter of a row's values in the model's column order, by name."""
    return operator.itemgetter(*(names.index(name) for name in _attnames()))


def _visible_run(args: Args) -> QuerySet[Run, dict[str, Any]]:
    members = Membership.objects.filter(user_id=args.integer("user_id"))
    return (
        Run.objects.filter(
            pk=args.integer("run_id"),
            project_id__in=members.values("project_id"),
        )
        .order_by()
        .values(*_attnames())
    )


def run_visible(*, user_id: int, run_id: int) -> Run | None:
    """The run, its columns only (no related row), if the user is a member
    of its project; else None."""
    read = compiled.statement("run-visible", _visible_run)
    names, found = compiled.fetch(read, {"user_id": user_id, "run_id": run_id})
    if not found:
        return None
    values = _in_model_order(names)(found[0])
    return Run.from_db(connection.alias, _attnames(), values)

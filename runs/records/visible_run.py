"""A run the user may see, as the ORM reads it, in one compiled statement.

Nearly every page and endpoint of a run reads it first (``run_get``): with
its project, dataset and creator, scoped to the user's memberships. Built by
the ORM, that read took about as long as the rest of a cached page, and half
of the summary's time; compiled once (``compiled.py``), it is a plain
statement whose rows become the same model instances. What a run's figures
need (the summary) is the run's own columns alone. Scoped as
``access.project_ids_where`` scopes a view; tests/test_hot_reads.py checks
each read against its ORM twin.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F, QuerySet

from runs.models import Dataset, Membership, Project, Run
from runs.records import compiled
from runs.records.compiled import Args
from runs.records.instances import attnames, model_instance

# The creator's columns in the read with related rows: under names no
# column of the run has (as the project's and the dataset's).
_CREATOR = "created_by__"


def _visible_run_with_related(args: Args) -> QuerySet[Run, dict[str, Any]]:
    related = {
        prefix + name: F(prefix + name)
        for model, prefix in ((Project, "project__"), (Dataset, "dataset__"))
        for name in attnames(model)
    }
    creator = {
        _CREATOR + name: F(_CREATOR + name) for name in attnames(get_user_model())
    }
    return _visible(args).values(*attnames(Run), **related, **creator)


def run_visible_with_related(*, user_id: int, run_id: int) -> Run | None:
    """The run with its project, dataset and creator (``run_get``), if the
    user is a member of its project; else None."""
    read = compiled.statement("run-visible-related", _visible_run_with_related)
    names, found = compiled.fetch(read, {"user_id": user_id, "run_id": run_id})
    if not found:
        return None
    row = found[0]
    run = model_instance(Run, names, row)
    run.project = model_instance(Project, names, row, "project__")
    run.dataset = model_instance(Dataset, names, row, "dataset__")
    user_model = get_user_model()
    creator = row[names.index(_CREATOR + user_model._meta.pk.attname)]
    run.created_by = (
        None if creator is None else model_instance(user_model, names, row, _CREATOR)
    )
    return run


def _visible(args: Args) -> QuerySet[Run]:
    members = Membership.objects.filter(user_id=args.integer("user_id"))
    return Run.objects.filter(
        pk=args.integer("run_id"), project_id__in=members.values("project_id")
    ).order_by()


def _visible_run(args: Args) -> QuerySet[Run, dict[str, Any]]:
    return _visible(args).values(*attnames(Run))


def run_visible(*, user_id: int, run_id: int) -> Run | None:
    """The run, its columns only (no related row), if the user is a member
    of its project; else None."""
    read = compiled.statement("run-visible", _visible_run)
    names, found = compiled.fetch(read, {"user_id": user_id, "run_id": run_id})
    if not found:
        return None
    return model_instance(Run, names, found[0])

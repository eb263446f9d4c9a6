"""Reads of datasets, their versions and their items."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet, Subquery

from runs.models import Dataset, Item, Run
from runs.records import compiled
from runs.records.compiled import Args
from runs.web.selectors import row_get, visible_rows


def dataset_list(*, user: User, project_id: int | None = None) -> QuerySet[Dataset]:
    rows = visible_rows(Dataset, user=user, project_id=project_id)
    return rows.select_related("project")


def dataset_get(*, user: User, dataset_id: int) -> Dataset:
    return row_get(dataset_list(user=user), pk=dataset_id, noun="dataset")


def dataset_items(*, dataset: Dataset) -> QuerySet[Item]:
    return Item.objects.filter(dataset=dataset).order_by("index")


def dataset_versions(*, dataset: Dataset) -> QuerySet[Dataset]:
    """All versions of the dataset's name in its project, newest first."""
    return Dataset.objects.filter(
        project_id=dataset.project_id, name=dataset.name
    ).order_by("-version")


def _names(datasets: QuerySet[Dataset]) -> QuerySet[Dataset, str]:
    return datasets.order_by("name").values_list("name", flat=True).distinct()


def dataset_names(*, project_id: int) -> list[str]:
    """The names of a project's datasets, each once, in order."""
    return list(_names(Dataset.objects.filter(project_id=project_id)))


def _run_project_dataset_names(args: Args) -> QuerySet[Dataset, str]:
    run = Run.objects.filter(pk=args.integer("run_id"))
    project = run.values("project_id")[:1]
    return _names(Dataset.objects.filter(project_id=Subquery(project)))


def run_dataset_names_key(*, run_id: int) -> tuple[str, ...]:
    """``dataset_names`` of the run's project, read in one compiled statement:
    a part of a cached page's key."""
    _names_read, rows = compiled.fetch(
        compiled.statement("run-dataset-names", _run_project_dataset_names),
        {"run_id": run_id},
        convert=False,
    )
    return tuple(row[0] for row in rows)

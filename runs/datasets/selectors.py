"""Reads of datasets, their versions and their items."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from runs.models import Dataset, Item
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


def dataset_names(*, project_id: int) -> list[str]:
    """The names of a project's datasets, each once, in order."""
    return list(
        Dataset.objects.filter(project_id=project_id)
        .order_by("name")
        .values_list("name", flat=True)
        .distinct()
    )

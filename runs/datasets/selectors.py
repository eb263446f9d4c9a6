"""Reads of datasets, their versions and their items."""

from __future__ import annotations

from django.db.models import (
    QuerySet,
)

from runs.access import visible_project_ids
from runs.errors import NotFound
from runs.models import (
    Dataset,
    Item,
)
from runs.projects.selectors import User


def dataset_list(*, user: User, project_id: int | None = None) -> QuerySet[Dataset]:
    datasets = Dataset.objects.filter(
        project_id__in=visible_project_ids(user)
    ).select_related("project")
    if project_id is not None:
        datasets = datasets.filter(project_id=project_id)
    return datasets


def dataset_get(*, user: User, dataset_id: int) -> Dataset:
    try:
        return dataset_list(user=user).get(pk=dataset_id)
    except Dataset.DoesNotExist:
        raise NotFound(f"no dataset {dataset_id}") from None


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

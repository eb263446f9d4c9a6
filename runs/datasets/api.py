"""The dataset endpoints: create, upload, preview, list, read, items."""

from __future__ import annotations

from pathlib import PurePath

from django.db.models import QuerySet
from ninja import File, Form, Query, Router, Status, UploadedFile

from runs.datasets import importers
from runs.datasets.schemas import (
    DatasetFilter,
    DatasetIn,
    DatasetOut,
    DatasetPreviewForm,
    DatasetPreviewOut,
    DatasetUploadForm,
    ItemOut,
)
from runs.datasets.selectors import dataset_get, dataset_items, dataset_list
from runs.models import Dataset, Item
from runs.projects.selectors import project_get
from runs.web.api import ERRORS, READ_ERRORS, paginated
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

dataset_router = Router(tags=["datasets"])


@dataset_router.post("", response={201: DatasetOut, **ERRORS})
def create_dataset(request: ApiRequest, payload: DatasetIn) -> Status[Dataset]:
    """Create a dataset (a new version when the name exists) from JSON items."""
    data = payload.model_dump(exclude={"project"})
    project = project_get(user=request.auth, project_id=payload.project)
    dataset = importers.dataset_create_from_items(
        project=project, user=request.auth, **data
    )
    return Status(201, dataset)


@dataset_router.post("/upload", response={201: DatasetOut, **ERRORS})
def upload_dataset(
    request: ApiRequest, form: Form[DatasetUploadForm], file: File[UploadedFile]
) -> Status[Dataset]:
    """Import a JSONL, CSV, JSON or YAML file as a dataset."""
    data = form.model_dump(exclude={"project", "name"})
    project = project_get(user=request.auth, project_id=form.project)
    source = importers.Source.from_upload(file)
    dataset = importers.dataset_import(
        project=project,
        user=request.auth,
        name=form.name or PurePath(source.name).stem,
        source=source,
        **data,
    )
    return Status(201, dataset)


@dataset_router.post("/preview", response={200: DatasetPreviewOut, **ERRORS})
def preview_dataset(
    request: ApiRequest, form: Form[DatasetPreviewForm], file: File[UploadedFile]
) -> importers.Preview:
    """The fields a file's records have and its first rows, to map before upload.

    Nothing is stored. `guess` names the likeliest id, input and expected fields.
    """
    project = project_get(user=request.auth, project_id=form.project)
    return importers.dataset_preview(
        project=project,
        user=request.auth,
        source=importers.Source.from_upload(file),
        format=form.format,
    )


@dataset_router.get("", response={200: list[DatasetOut], **READ_ERRORS})
@paginated
def list_datasets(
    request: ApiRequest, filters: Query[DatasetFilter]
) -> QuerySet[Dataset]:
    return filters.filter(dataset_list(user=request.auth))


@dataset_router.get("/{dataset_id}", response={200: DatasetOut, **READ_ERRORS})
def get_dataset(request: ApiRequest, dataset_id: DbId) -> Dataset:
    return dataset_get(user=request.auth, dataset_id=dataset_id)


@dataset_router.get("/{dataset_id}/items", response={200: list[ItemOut], **READ_ERRORS})
@paginated
def list_dataset_items(request: ApiRequest, dataset_id: DbId) -> QuerySet[Item]:
    """The dataset's items in dataset order."""
    dataset = dataset_get(user=request.auth, dataset_id=dataset_id)
    return dataset_items(dataset=dataset)

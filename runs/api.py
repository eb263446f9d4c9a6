"""The JSON API under /api/v1/: thin handlers over selectors and services.

No ``from __future__ import annotations`` here, unlike elsewhere: django-ninja
resolves handler annotations through the handler's ``__globals__``, and
``@paginate`` wraps handlers in a function of ninja's own module, where names
such as ``RunFilter`` would not resolve.
"""

from pathlib import PurePath
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver
from ninja import File, Form, NinjaAPI, Query, Router, Status, UploadedFile
from ninja.pagination import PageNumberPagination, paginate
from ninja.security import HttpBearer, django_auth

from runs import importers
from runs.errors import DomainError, InvalidInput
from runs.models import Dataset, Item, Result, ResultStatus, Run, Target
from runs.schemas import (
    DatasetFilter,
    DatasetIn,
    DatasetOut,
    DatasetPreviewForm,
    DatasetPreviewOut,
    DatasetUploadForm,
    ErrorOut,
    ItemOut,
    ResultOut,
    RunDetailOut,
    RunFilter,
    RunIn,
    RunOut,
    TargetFilter,
    TargetIn,
    TargetOut,
)
from runs.selectors import (
    dataset_get,
    dataset_items,
    dataset_list,
    project_get,
    result_list,
    run_get,
    run_list,
    target_get,
    target_list,
)
from runs.services import api_key_authenticate, run_cancel, run_create, target_create

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# Pages for people keep the site-wide login redirect; API calls answer 401.
LOGIN_REDIRECTED_URL_NAMES = frozenset({"openapi-json", "openapi-view", "api-root"})
ERRORS: dict[int, Any] = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
}

paginated = paginate(
    PageNumberPagination, page_size=PAGE_SIZE, max_page_size=MAX_PAGE_SIZE
)


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer evk_...``; no CSRF check, as no cookie is involved."""

    def authenticate(self, request: HttpRequest, token: str) -> AbstractBaseUser | None:
        key = api_key_authenticate(token)
        if key is None:
            return None
        request.user = key.user
        return key.user


class EvalsiteAPI(NinjaAPI):
    @property
    def urls(self) -> tuple[list[URLPattern | URLResolver], str, str]:
        patterns, app_name, namespace = super().urls
        for pattern in patterns:
            if (
                isinstance(pattern, URLPattern)
                and pattern.name not in LOGIN_REDIRECTED_URL_NAMES
            ):
                login_not_required(pattern.callback)
        return patterns, app_name, namespace


api = EvalsiteAPI(
    title="evalsite API",
    version="1",
    description=(
        "Datasets, targets and runs of the projects you belong to. Authenticate "
        "with your session (and its CSRF token) or `Authorization: Bearer <key>`; "
        "create a key with `python manage.py create_api_key USERNAME`."
    ),
    auth=[ApiKeyAuth(), django_auth],
)


dataset_router = Router(tags=["datasets"])
target_router = Router(tags=["targets"])
run_router = Router(tags=["runs"])


@api.exception_handler(DomainError)
def domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    if isinstance(exc, InvalidInput):
        body = exc.as_dict()
    else:
        body = {"detail": str(exc), "field": None, "line": None}
    return api.create_response(request, body, status=exc.status_code)


# -- datasets -----------------------------------------------------------------


@dataset_router.post("", response={201: DatasetOut, **ERRORS})
def create_dataset(request: HttpRequest, payload: DatasetIn) -> Status[Dataset]:
    """Create a dataset (a new version when the name exists) from JSON items."""
    data = payload.model_dump(exclude={"project"})
    project = project_get(user=request.auth, project_id=payload.project)
    dataset = importers.dataset_create_from_items(
        project=project, user=request.auth, **data
    )
    return Status(201, dataset)


@dataset_router.post("/upload", response={201: DatasetOut, **ERRORS})
def upload_dataset(
    request: HttpRequest, form: Form[DatasetUploadForm], file: File[UploadedFile]
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
    request: HttpRequest, form: Form[DatasetPreviewForm], file: File[UploadedFile]
) -> importers.Preview:
    """The fields a file's records have and its first rows, to map before upload.

    Nothing is stored. `guess` names the likeliest id, input and expected fields.
    """
    return importers.preview_file(
        source=importers.Source.from_upload(file), format=form.format
    )


@dataset_router.get("", response=list[DatasetOut])
@paginated
def list_datasets(
    request: HttpRequest, filters: Query[DatasetFilter]
) -> QuerySet[Dataset]:
    return filters.filter(dataset_list(user=request.auth))


@dataset_router.get("/{dataset_id}", response={200: DatasetOut, **ERRORS})
def get_dataset(request: HttpRequest, dataset_id: int) -> Dataset:
    return dataset_get(user=request.auth, dataset_id=dataset_id)


@dataset_router.get("/{dataset_id}/items", response={200: list[ItemOut], **ERRORS})
@paginated
def list_dataset_items(request: HttpRequest, dataset_id: int) -> QuerySet[Item]:
    """The dataset's items in dataset order."""
    dataset = dataset_get(user=request.auth, dataset_id=dataset_id)
    return dataset_items(dataset=dataset)


# -- targets ------------------------------------------------------------------


@target_router.post("", response={201: TargetOut, **ERRORS})
def create_target(request: HttpRequest, payload: TargetIn) -> Status[Target]:
    """Store a target; secrets are refused, name environment variables instead."""
    project = project_get(user=request.auth, project_id=payload.project)
    target = target_create(
        project=project,
        user=request.auth,
        name=payload.name,
        kind=payload.kind,
        config=payload.config,
    )
    return Status(201, target)


@target_router.get("", response=list[TargetOut])
@paginated
def list_targets(
    request: HttpRequest, filters: Query[TargetFilter]
) -> QuerySet[Target]:
    return filters.filter(target_list(user=request.auth))


@target_router.get("/{target_id}", response={200: TargetOut, **ERRORS})
def get_target(request: HttpRequest, target_id: int) -> Target:
    return target_get(user=request.auth, target_id=target_id)


# -- runs ---------------------------------------------------------------------


@run_router.post("", response={201: RunDetailOut, **ERRORS})
def create_run(request: HttpRequest, payload: RunIn) -> Status[Run]:
    """Create a run of a dataset against a stored or ad-hoc target, and launch it."""
    dataset = dataset_get(user=request.auth, dataset_id=payload.dataset)
    target = None
    if payload.target is not None:
        target = target_get(user=request.auth, target_id=payload.target)
    run = run_create(
        user=request.auth,
        dataset=dataset,
        target=target,
        target_kind=payload.target_kind,
        target_config=payload.target_config,
        scorers=payload.scorer_specs(),
        options=payload.options,
        name=payload.name,
    )
    return Status(201, run)


@run_router.get("", response=list[RunOut])
@paginated
def list_runs(request: HttpRequest, filters: Query[RunFilter]) -> QuerySet[Run]:
    """Runs, newest first."""
    return filters.filter(run_list(user=request.auth))


@run_router.get("/{run_id}", response={200: RunDetailOut, **ERRORS})
def get_run(request: HttpRequest, run_id: int) -> Run:
    return run_get(user=request.auth, run_id=run_id)


@run_router.post("/{run_id}/cancel", response={200: RunDetailOut, **ERRORS})
def cancel_run(request: HttpRequest, run_id: int) -> Run:
    """Ask a run to stop; repeating it, or cancelling an ended run, is harmless."""
    run = run_get(user=request.auth, run_id=run_id)
    return run_cancel(run=run, user=request.auth)


@run_router.get("/{run_id}/results", response={200: list[ResultOut], **ERRORS})
@paginated
def list_results(
    request: HttpRequest, run_id: int, status: ResultStatus | None = None
) -> QuerySet[Result]:
    """A run's results in dataset order, optionally only those of one status."""
    run = run_get(user=request.auth, run_id=run_id)
    return result_list(run=run, status=status)


api.add_router("/datasets", dataset_router)
api.add_router("/targets", target_router)
api.add_router("/runs", run_router)

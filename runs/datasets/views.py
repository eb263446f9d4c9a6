"""The dataset pages: the list, a dataset, the upload and its field mapping."""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from runs.access import Action, can, projects_where
from runs.datasets import selectors
from runs.datasets.forms import DatasetMappingForm, DatasetUploadForm
from runs.datasets.importers import staging
from runs.datasets.selectors import dataset_get, dataset_items, dataset_versions
from runs.projects.selectors import project_get
from runs.web.forms import submitted
from runs.web.pages import page_of, query_id
from runs.web.requests import AuthedRequest

ITEMS_PER_PAGE = 50


@require_GET
def dataset_list(request: AuthedRequest) -> HttpResponse:
    datasets = selectors.dataset_list(user=request.user).order_by(
        "project__name", "name", "-version"
    )
    context = {"page": page_of(request, datasets, ITEMS_PER_PAGE)}
    return render(request, "runs/datasets/dataset_list.html", context)


@require_GET
def dataset_detail(request: AuthedRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_get(user=request.user, dataset_id=dataset_id)
    context = {
        "dataset": dataset,
        "page": page_of(request, dataset_items(dataset=dataset), ITEMS_PER_PAGE),
        "versions": dataset_versions(dataset=dataset),
        "can_edit": can(request.user, dataset.project, Action.EDIT),
    }
    return render(request, "runs/datasets/dataset_detail.html", context)


@require_http_methods(["GET", "POST"])
def dataset_upload(request: AuthedRequest) -> HttpResponse:
    """Step one: the file is checked, kept for a while, and its fields shown next."""
    initial = {
        "project": query_id(request.GET.get("project")),
        "name": request.GET.get("name"),
    }
    form = DatasetUploadForm(
        request.POST or None,
        request.FILES or None,
        user=request.user,
        initial={key: value for key, value in initial.items() if value},
    )
    staged = submitted(
        form, lambda: staging.upload_stage(user=request.user, **form.stage_arguments())
    )
    if staged is not None:
        return redirect("runs:dataset_upload_map", token=staged.token)
    can_edit = projects_where(request.user, Action.EDIT).exists()
    return render(
        request,
        "runs/datasets/dataset_upload.html",
        {"form": form, "can_edit": can_edit},
    )


@require_http_methods(["GET", "POST"])
def dataset_upload_map(request: AuthedRequest, token: str) -> HttpResponse:
    """Step two: say which field is the id, the input and the expected answer."""
    staged = staging.upload_get(user=request.user, token=token)
    project = project_get(user=request.user, project_id=staged.project_id)
    form = DatasetMappingForm(request.POST or None, preview=staged.preview)
    dataset = submitted(
        form,
        lambda: staging.upload_import(
            staged=staged, project=project, user=request.user, **form.import_arguments()
        ),
        conflict_field=NON_FIELD_ERRORS,
    )
    if dataset is not None:
        return redirect("runs:dataset_detail", dataset_id=dataset.pk)
    context = {
        "form": form,
        "staged": staged,
        "project": project,
        "table": staged.preview.table(),
    }
    return render(request, "runs/datasets/dataset_upload_map.html", context)

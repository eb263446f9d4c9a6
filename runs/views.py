"""Server-rendered pages; live progress arrives over the websocket (consumers.py).

Every view is login-protected by LoginRequiredMiddleware and reads through the
user-scoped selectors; domain errors become 404 / 403 in one decorator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from asgiref.sync import iscoroutinefunction
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runs import demo, hot_reads, pagecache, secrets, selectors, services
from runs.access import editable_projects, role_of
from runs.analysis.clusters import run_clusters_cached
from runs.analysis.export import EXPORT_FORMATS
from runs.catalogue import plugin_catalogue
from runs.downloads import export_response
from runs.errors import Conflict, Forbidden, InvalidInput, NotFound
from runs.forms import (
    DatasetMappingForm,
    DatasetUploadForm,
    RunForm,
    SecretForm,
    TargetForm,
    add_domain_error,
)
from runs.importers import staging
from runs.models import ErrorKind, Membership, Result, Run, RunStatus
from runs.schemas import MAX_DB_INT

RUNS_PER_PAGE = 50
RESULTS_PER_PAGE = 50
ITEMS_PER_PAGE = 50
LIVE_SNAPSHOT_ROWS = 20
# Runs over the same dataset a run's clusters may be compared with.
BASELINE_CHOICES = 50
MAX_PAGE = 1_000_000
MAX_PAGE_DIGITS = len(str(MAX_PAGE))


def domain_errors[View: Callable[..., Any]](view: View) -> View:
    """Show NotFound as 404 and Forbidden as 403, once for every page."""
    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def async_wrapper(
            request: HttpRequest, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            try:
                return await view(request, *args, **kwargs)  # type: ignore[no-any-return]
            except NotFound as exc:
                raise Http404(str(exc)) from exc
            except Forbidden as exc:
                raise PermissionDenied(str(exc)) from exc

        return cast(View, async_wrapper)

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)  # type: ignore[no-any-return]
        except NotFound as exc:
            raise Http404(str(exc)) from exc
        except Forbidden as exc:
            raise PermissionDenied(str(exc)) from exc

    return cast(View, wrapper)


def _page(request: HttpRequest, queryset: QuerySet[Any], per_page: int) -> Page:
    # Anything but a page number in range shows the first or the last page.
    number = request.GET.get("page", "")
    if not (number.isascii() and number.isdigit()):
        page = 1
    elif len(number) > MAX_PAGE_DIGITS:
        page = MAX_PAGE
    else:
        page = min(int(number), MAX_PAGE)
    return Paginator(queryset, per_page).get_page(min(page, MAX_PAGE))


def _int_or_none(value: str | None) -> int | None:
    """A database id from the query string, or None (never one out of range)."""
    if not (value and value.isascii() and value.isdigit()):
        return None
    if len(value) > len(str(MAX_DB_INT)):
        return None
    number = int(value)
    return number if 1 <= number <= MAX_DB_INT else None


# -- runs ------------------------------------------------------------------------


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    project_id = _int_or_none(request.GET.get("project"))
    status = request.GET.get("status") or None
    runs = hot_reads.RunTable(
        user_id=request.user.pk, project_id=project_id, status=status
    )
    page = _page(request, runs, RUNS_PER_PAGE)
    projects = hot_reads.project_choices(user_id=request.user.pk)
    offer = demo.run_demo_offer(user=request.user)
    context = {
        "page": page,
        "projects": projects,
        "statuses": RunStatus.choices,
        "project_id": project_id,
        "status": status or "",
        "demo": offer,
    }
    # The rows carry every value the table shows, as of this read.
    key_data = (page.number, page.paginator.count, page.object_list, projects, offer)
    return pagecache.render_cached(
        request, "runs/run_list.html", lambda: (context, 200), key_data=key_data
    )


@domain_errors
@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest) -> HttpResponse:
    form = RunForm(
        request.POST or None, user=request.user, initial=_run_initial(request)
    )
    if form.is_bound and form.is_valid():
        try:
            run = services.run_create(user=request.user, **form.run_arguments())
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            return redirect("runs:run_detail", run_id=run.pk)
    can_edit = editable_projects(request.user).exists()
    return render(request, "runs/run_new.html", {"form": form, "can_edit": can_edit})


def _run_initial(request: HttpRequest) -> dict[str, Any]:
    """Preselections from the query: ?dataset=, ?target=, or the demo (?demo=1)."""
    initial: dict[str, Any] = {
        key: _int_or_none(request.GET.get(key)) for key in ("dataset", "target")
    }
    choice = demo.run_demo_choice(user=request.user) if "demo" in request.GET else None
    if choice is not None:
        dataset, target = choice
        initial.update(
            dataset=dataset.pk,
            target=target.pk,
            name=demo.DEMO_RUN_NAME,
            concurrency=demo.DEMO_RUN_CONCURRENCY,
        )
    return {key: value for key, value in initial.items() if value is not None}


@domain_errors
@require_POST
def run_demo_start(request: HttpRequest) -> HttpResponse:
    """Start the demo run and show it live; the new-run form if it cannot start."""
    try:
        run = demo.demo_run_start(user=request.user)
    except InvalidInput as exc:
        messages.error(request, f"The demo run could not start: {exc}")
        return redirect(f"{reverse('runs:run_new')}?demo=1")
    return redirect("runs:run_detail", run_id=run.pk)


@domain_errors
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    # A finished run's page: from the cache while nothing it shows has moved.
    def state() -> tuple[Any, ...] | None:
        return hot_reads.run_page_state(user_id=request.user.pk, run_id=run_id)

    return pagecache.render_cached(
        request,
        "runs/run_detail.html",
        lambda: _run_detail_context(request, run_id),
        key_data=state(),
        still_current=state,
    )


def _run_detail_context(
    request: HttpRequest, run_id: int
) -> tuple[dict[str, Any], int]:
    overview = selectors.run_overview(user=request.user, run_id=run_id)
    run = overview.run
    try:
        filters = selectors.ResultFilters.parse(request.GET, run=run)
        filter_error = None
    except InvalidInput as exc:
        filters, filter_error = selectors.ResultFilters(), exc
    if filters.lists_items:
        rows: QuerySet[Any] = selectors.run_items_left(run=run, filters=filters)
    else:
        rows = selectors.result_filter(run=run, filters=filters)
    context = {
        "overview": overview,
        "run": run,
        # Counted and read only when the cached results table is rendered.
        "page": SimpleLazyObject(lambda: _page(request, rows, RESULTS_PER_PAGE)),
        "status": filters.status or "",
        "filters": filters,
        "filter_error": filter_error,
        "filter_choices": result_filter_choices(run),
        "result_statuses": Result.Status.choices,
        # Only a run still going shows its latest results live.
        "live_rows": []
        if overview.run.is_final
        else selectors.result_latest(run=overview.run, limit=LIVE_SNAPSHOT_ROWS),
        "show_epoch": overview.run.options.get("epochs", 1) > 1,
        "report": selectors.run_report(run=overview.run),
    }
    return context, 400 if filter_error else 200


def result_filter_choices(run: Run) -> dict[str, Any]:
    """The options of the results filter form of ``run``."""
    left = selectors.PENDING if not run.is_final else selectors.SKIPPED
    return {
        "statuses": [*Result.Status.choices, (left, left.capitalize())],
        "error_kinds": ErrorKind.choices,
        "scorers": run.scorer_names,
        "verdicts": selectors.VERDICTS,
    }


@domain_errors
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(user=request.user, run_id=run_id)
    services.run_cancel(run=run, user=request.user)
    if not request.headers.get("HX-Request"):
        return redirect("runs:run_detail", run_id=run_id)
    overview = selectors.run_overview(user=request.user, run_id=run_id)
    return render(request, "runs/_cancel_response.html", {"overview": overview})


@domain_errors
@require_GET
def result_detail(request: HttpRequest, run_id: int, result_id: int) -> HttpResponse:
    result = selectors.result_get(user=request.user, run_id=run_id, result_id=result_id)
    return render(request, "runs/result_detail.html", {"result": result})


# -- datasets --------------------------------------------------------------------


@require_GET
def dataset_list(request: HttpRequest) -> HttpResponse:
    datasets = selectors.dataset_list(user=request.user).order_by(
        "project__name", "name", "-version"
    )
    context = {"page": _page(request, datasets, ITEMS_PER_PAGE)}
    return render(request, "runs/dataset_list.html", context)


@domain_errors
@require_GET
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = selectors.dataset_get(user=request.user, dataset_id=dataset_id)
    context = {
        "dataset": dataset,
        "page": _page(
            request, selectors.dataset_items(dataset=dataset), ITEMS_PER_PAGE
        ),
        "versions": selectors.dataset_versions(dataset=dataset),
    }
    return render(request, "runs/dataset_detail.html", context)


@domain_errors
@require_http_methods(["GET", "POST"])
def dataset_upload(request: HttpRequest) -> HttpResponse:
    """Step one: the file is checked, kept for a while, and its fields shown next."""
    initial = {
        "project": _int_or_none(request.GET.get("project")),
        "name": request.GET.get("name"),
    }
    form = DatasetUploadForm(
        request.POST or None,
        request.FILES or None,
        user=request.user,
        initial={key: value for key, value in initial.items() if value},
    )
    if form.is_bound and form.is_valid():
        try:
            staged = staging.upload_stage(user=request.user, **form.stage_arguments())
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            return redirect("runs:dataset_upload_map", token=staged.token)
    can_edit = editable_projects(request.user).exists()
    return render(
        request, "runs/dataset_upload.html", {"form": form, "can_edit": can_edit}
    )


@domain_errors
@require_http_methods(["GET", "POST"])
def dataset_upload_map(request: HttpRequest, token: str) -> HttpResponse:
    """Step two: say which field is the id, the input and the expected answer."""
    staged = staging.upload_get(user=request.user, token=token)
    project = selectors.project_get(user=request.user, project_id=staged.project_id)
    form = DatasetMappingForm(request.POST or None, preview=staged.preview)
    if form.is_bound and form.is_valid():
        try:
            dataset = staging.upload_import(
                staged=staged,
                project=project,
                user=request.user,
                **form.import_arguments(),
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        except Conflict as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("runs:dataset_detail", dataset_id=dataset.pk)
    context = {
        "form": form,
        "staged": staged,
        "project": project,
        "table": staged.preview.table(),
    }
    return render(request, "runs/dataset_upload_map.html", context)


# -- targets ---------------------------------------------------------------------


@domain_errors
@require_http_methods(["GET", "POST"])
def target_list(request: HttpRequest) -> HttpResponse:
    form = TargetForm(request.POST or None, user=request.user)
    if form.is_bound and form.is_valid():
        try:
            services.target_create(user=request.user, **form.target_arguments())
        except InvalidInput as exc:
            add_domain_error(form, exc)
        except Conflict as exc:
            form.add_error("name", str(exc))
        else:
            return redirect("runs:target_list")
    context = {
        "form": form,
        "targets": selectors.target_list(user=request.user).order_by(
            "project__name", "name"
        ),
        "can_edit": editable_projects(request.user).exists(),
    }
    return render(request, "runs/target_list.html", context)


# -- catalogue -------------------------------------------------------------------


@require_GET
def catalogue(request: HttpRequest) -> HttpResponse:
    """Every target kind and scorer with its parameters, example and secrets."""
    return render(request, "runs/catalogue.html", plugin_catalogue())


# -- project secrets -------------------------------------------------------------


@domain_errors
@require_http_methods(["GET", "POST"])
def project_secrets(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get(user=request.user, project_id=project_id)
    form = SecretForm(request.POST or None)
    if form.is_bound and form.is_valid():
        try:
            secret, created = secrets.secret_set(
                project=project, user=request.user, **form.cleaned_data
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            verb = "added" if created else "updated"
            messages.success(request, f"Secret {secret.name} {verb}.")
            return redirect("runs:project_secrets", project_id=project.pk)
    context = {
        "project": project,
        "secrets": secrets.secret_list(project=project, user=request.user),
        "is_admin": role_of(request.user, project) == Membership.Role.ADMIN,
        "form": form,
    }
    return render(request, "runs/project_secrets.html", context)


@domain_errors
@require_POST
def project_secret_delete(
    request: HttpRequest, project_id: int, name: str
) -> HttpResponse:
    project = selectors.project_get(user=request.user, project_id=project_id)
    secrets.secret_delete(project=project, user=request.user, name=name)
    messages.success(request, f"Secret {name} deleted.")
    return redirect("runs:project_secrets", project_id=project.pk)


# -- failure clusters --------------------------------------------------------------


@domain_errors
@require_GET
def run_clusters(request: HttpRequest, run_id: int) -> HttpResponse:
    """A run's failure clusters, against a baseline run chosen on the page."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    baseline_id = _int_or_none(request.GET.get("baseline"))
    baseline = (
        selectors.run_get(user=request.user, run_id=baseline_id)
        if baseline_id
        else None
    )
    context = {
        "run": run,
        "clusters": run_clusters_cached(run=run, baseline=baseline),
        "baselines": selectors.run_compare_choices(
            user=request.user, run=run, limit=BASELINE_CHOICES
        ),
        "dataset_names": selectors.dataset_names(project_id=run.project_id),
        "can_edit": role_of(request.user, run.project)
        in (Membership.Role.EDITOR, Membership.Role.ADMIN),
    }
    return render(request, "runs/run_clusters.html", context)


@domain_errors
@require_POST
def run_cluster_save(request: HttpRequest, run_id: int) -> HttpResponse:
    """Save a cluster's items as a new dataset, or a new version of one."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    try:
        dataset = services.dataset_create_from_cluster(
            run=run,
            user=request.user,
            key=request.POST.get("cluster", ""),
            name=request.POST.get("name", ""),
        )
    except (InvalidInput, Conflict) as exc:
        messages.error(request, f"The cluster could not be saved: {exc}")
        return redirect("runs:run_clusters", run_id=run.pk)
    messages.success(
        request,
        f"Saved {dataset.item_count} items as {dataset.name} v{dataset.version}.",
    )
    return redirect("runs:dataset_detail", dataset_id=dataset.pk)


# -- export ----------------------------------------------------------------------


@domain_errors
@require_GET
def run_export(request: HttpRequest, run_id: int, format: str) -> HttpResponseBase:
    """The run's results as a CSV or JSON Lines download."""
    if format not in EXPORT_FORMATS:
        raise Http404(f"no export format {format!r}")
    run = selectors.run_get(user=request.user, run_id=run_id)
    return export_response(run=run, format=format)

"""The run pages: the list, a new run, a run, a result, the export."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.http import Http404, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils.functional import SimpleLazyObject
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runs.access import Action, projects_where
from runs.analysis.export import EXPORT_FORMATS
from runs.errors import InvalidInput
from runs.models import (
    FINAL_RUN_STATUSES,
    ErrorKind,
    Result,
    Run,
    RunStatus,
    call_status_label,
)
from runs.records import cache_keys, page_state, pagecache, reads
from runs.results import services
from runs.results.demo_offer import (
    DEMO_RUN_CONCURRENCY,
    DEMO_RUN_NAME,
    run_demo_choice,
    run_demo_offer,
)
from runs.results.downloads import export_response
from runs.results.forms import RunForm
from runs.results.result_page import result_view
from runs.results.rows import result_rows
from runs.results.selectors import (
    PENDING,
    SKIPPED,
    VERDICTS,
    ResultFilters,
    result_latest,
    run_get,
    run_overview,
    run_report,
)
from runs.results.services import run_create
from runs.results.trajectory import trajectory_section
from runs.web.forms import submitted
from runs.web.pages import page_of, query_id
from runs.web.requests import AuthedRequest

RUNS_PER_PAGE = 50
RESULTS_PER_PAGE = 50
LIVE_SNAPSHOT_ROWS = 20
# Of a row of the runs table, the fields that stay as a run's batches come in.
_STEADY_FIELDS = tuple(
    n
    for n, field in enumerate(dataclasses.fields(reads.RunRow))
    if field.name not in page_state.BATCH_COLUMNS
)


def run_row_key(row: reads.RunRow) -> tuple[Any, ...]:
    """A row of the runs table as a key part: a finished run's every value;
    a going run's without its counts, which move with each batch it stores
    (every worker's, several a second), and with the current second, as its
    page is keyed (``page_state.run_page_key``): the table is rendered at most
    once a second while runs go, never more than a second behind them."""
    values = cache_keys.record(row)
    if row.status in FINAL_RUN_STATUSES:
        return values
    return (*(values[n] for n in _STEADY_FIELDS), cache_keys.going_moment())


@require_GET
def run_list(request: AuthedRequest) -> HttpResponse:
    project_id = query_id(request.GET.get("project"))
    status = request.GET.get("status") or None
    runs = reads.RunTable(user_id=request.user.pk, project_id=project_id, status=status)
    page = page_of(request, runs, RUNS_PER_PAGE)
    projects = reads.project_choices(user_id=request.user.pk)
    offer = run_demo_offer(user=request.user)
    context = {
        "page": page,
        "projects": projects,
        "statuses": RunStatus.choices,
        "project_id": project_id,
        "status": status or "",
        "demo": offer,
    }
    # The rows carry every value the table shows, as of this read.
    key_data = (
        page.number,
        page.paginator.count,
        tuple(map(run_row_key, page.object_list)),
        tuple(map(cache_keys.record, projects)),
        cache_keys.record(offer) if offer is not None else None,
    )

    def build() -> tuple[dict[str, Any], int]:
        # Read only to render: the rows' figures_version keys them.
        pass_rates = reads.run_pass_rates(page.object_list)
        return {**context, "pass_rates": pass_rates}, 200

    return pagecache.render_cached(
        request, "runs/results/run_list.html", build, key_data=key_data
    )


@require_http_methods(["GET", "POST"])
def run_new(request: AuthedRequest) -> HttpResponse:
    form = RunForm(
        request.POST or None, user=request.user, initial=_run_initial(request)
    )
    run = submitted(form, lambda: run_create(user=request.user, **form.run_arguments()))
    if run is not None:
        return redirect("runs:run_detail", run_id=run.pk)
    can_edit = projects_where(request.user, Action.EDIT).exists()
    return render(
        request, "runs/results/run_new.html", {"form": form, "can_edit": can_edit}
    )


def _run_initial(request: AuthedRequest) -> dict[str, Any]:
    """Preselections from the query: ?dataset=, ?target=, or the demo (?demo=1)."""
    initial: dict[str, Any] = {
        key: query_id(request.GET.get(key)) for key in ("dataset", "target")
    }
    choice = run_demo_choice(user=request.user) if "demo" in request.GET else None
    if choice is not None:
        dataset, target = choice
        initial.update(
            dataset=dataset.pk,
            target=target.pk,
            name=DEMO_RUN_NAME,
            concurrency=DEMO_RUN_CONCURRENCY,
        )
    return {key: value for key, value in initial.items() if value is not None}


@require_GET
def run_detail(request: AuthedRequest, run_id: int) -> HttpResponse:
    # From the cache while nothing it shows has moved (page_state.run_page_key).
    def state() -> tuple[Any, ...] | None:
        return page_state.run_page_key(user_id=request.user.pk, run_id=run_id)

    return pagecache.render_current(
        request,
        "runs/results/run_detail.html",
        lambda: _run_detail_context(request, run_id),
        state=state,
    )


def _run_detail_context(
    request: AuthedRequest, run_id: int
) -> tuple[dict[str, Any], int]:
    overview = run_overview(user=request.user, run_id=run_id)
    run = overview.run
    try:
        filters = ResultFilters.parse(request.GET, run=run)
        filter_error = None
    except InvalidInput as exc:
        filters, filter_error = ResultFilters(), exc
    rows = result_rows(run=run, filters=filters)
    context = {
        "overview": overview,
        "run": run,
        # Counted and read only when the cached results table is rendered.
        "page": SimpleLazyObject(lambda: page_of(request, rows, RESULTS_PER_PAGE)),
        "status": filters.status or "",
        "filters": filters,
        "filter_error": filter_error,
        "filter_choices": result_filter_choices(run),
        "result_statuses": Result.Status.choices,
        # Only a run still going shows its latest results live.
        "live_rows": []
        if overview.run.is_final
        else result_latest(run=overview.run, limit=LIVE_SNAPSHOT_ROWS),
        "show_epoch": overview.run.epochs > 1,
        "report": run_report(run=overview.run),
    }
    return context, 400 if filter_error else 200


def result_filter_choices(run: Run) -> dict[str, Any]:
    """The options of the results filter form of ``run``."""
    left = PENDING if not run.is_final else SKIPPED
    return {
        "statuses": [
            *((value, call_status_label(value)) for value in Result.Status.values),
            (left, left.capitalize()),
        ],
        "error_kinds": ErrorKind.choices,
        "scorers": run.scorer_names,
        "verdicts": VERDICTS,
    }


@require_GET
def run_live_figures(request: AuthedRequest, run_id: int) -> HttpResponse:
    """The run page's summary and scoring passes, fetched again while the run
    goes (coalesced, by run_summary.js) and once when it ends; kept as the
    run's page is (page_state.run_page_key)."""

    def state() -> tuple[Any, ...] | None:
        return page_state.run_page_key(user_id=request.user.pk, run_id=run_id)

    def build() -> tuple[dict[str, Any], int]:
        overview = run_overview(user=request.user, run_id=run_id)
        report = run_report(run=overview.run)
        return {"overview": overview, "run": overview.run, "report": report}, 200

    return pagecache.render_current(
        request, "runs/results/_run_live_figures.html", build, state=state
    )


@require_POST
def run_cancel(request: AuthedRequest, run_id: int) -> HttpResponse:
    run = run_get(user=request.user, run_id=run_id)
    services.run_cancel(run=run, user=request.user)
    if not request.headers.get("HX-Request"):
        return redirect("runs:run_detail", run_id=run_id)
    overview = run_overview(user=request.user, run_id=run_id)
    return render(request, "runs/results/_cancel_response.html", {"overview": overview})


@require_GET
def result_detail(request: AuthedRequest, run_id: int, result_id: int) -> HttpResponse:
    # From the cache while its run's page state holds (page_state.run_page_key): a
    # result, its scores and its neighbours change only with its run's
    # results_version (a retry, a re-score, a review's label, a new batch);
    # its request and judges' prompts come from the run's row.
    def state() -> tuple[Any, ...] | None:
        run_state = page_state.run_page_key(user_id=request.user.pk, run_id=run_id)
        return None if run_state is None else (run_state, result_id)

    def build() -> tuple[dict[str, Any], int]:
        view = result_view(
            user=request.user, run_id=run_id, result_id=result_id, params=request.GET
        )
        trajectory = trajectory_section(view.result, request.GET.get("steps"))
        return {"result": view.result, "view": view, "trajectory": trajectory}, 200

    return pagecache.render_current(
        request, "runs/results/result_detail.html", build, state=state
    )


@require_GET
def run_export(request: AuthedRequest, run_id: int, format: str) -> HttpResponseBase:
    """The run's results as a CSV or JSON Lines download."""
    if format not in EXPORT_FORMATS:
        raise Http404(f"no export format {format!r}")
    run = run_get(user=request.user, run_id=run_id)
    return export_response(run=run, format=format)

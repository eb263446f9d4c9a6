"""The run endpoints: create, list, read, cancel, results, export, summary."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpResponse, StreamingHttpResponse
from ninja import Query, Router, Status

from runs.analysis import export
from runs.analysis.figures import run_figures
from runs.analysis.summary import RunSummary
from runs.datasets.selectors import dataset_get
from runs.models import Run
from runs.records import page_state, pagecache, reads
from runs.results.downloads import export_response
from runs.results.rows import Rows, result_rows
from runs.results.schemas import (
    PendingRows,
    ResultFilterIn,
    ResultRowOut,
    RunDetailOut,
    RunFilter,
    RunIn,
    RunOut,
    RunSummaryOut,
)
from runs.results.selectors import (
    ResultFilters,
    run_for_figures,
    run_get,
    run_list,
)
from runs.results.services import run_cancel, run_create
from runs.targets.selectors import target_get
from runs.web.api import (
    ERRORS,
    ERRORS_READ_FILTERED,
    PAGES,
    READ_ERRORS,
    BoundedPageNumberPagination,
    paged_output,
)
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

run_router = Router(tags=["runs"])


@run_router.post("", response={201: RunDetailOut, **ERRORS})
def create_run(request: ApiRequest, payload: RunIn) -> Status[Run]:
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


# The run list and the results page themselves, to answer from a cache.
PagedRunOut = paged_output("PagedRunOut", RunOut)
PagedResultRowOut = paged_output("PagedResultRowOut", ResultRowOut)


@run_router.get("", response={200: PagedRunOut, **READ_ERRORS})
def list_runs(
    request: ApiRequest,
    filters: Query[RunFilter],
    ninja_pagination: Query[BoundedPageNumberPagination.Input],
) -> HttpResponse:
    """Runs, newest first."""
    offset, page_size = PAGES.bounds(ninja_pagination)

    def read_rows() -> tuple[int, reads.KeyRows]:
        # Every column of the page's runs: the answer shows nothing else.
        return reads.run_records(
            user_id=request.auth.pk,
            filters=filters.model_dump(),
            offset=offset,
            limit=page_size,
        )

    def build() -> dict[str, Any]:
        # RunOut shows the project and dataset by id: no join, no rows to build.
        runs = filters.filter(run_list(user=request.auth)).select_related(None)
        return {"items": list(runs[offset : offset + page_size]), "count": count}

    count, _rows = key_data = read_rows()
    return pagecache.json_cached(
        request,
        name="runs",
        key_data=key_data,
        schema=PagedRunOut,
        build=build,
        still_current=read_rows,
    )


@run_router.get("/{run_id}", response={200: RunDetailOut, **READ_ERRORS})
def get_run(request: ApiRequest, run_id: DbId) -> Run:
    return run_get(user=request.auth, run_id=run_id)


@run_router.post("/{run_id}/cancel", response={200: RunDetailOut, **ERRORS})
def cancel_run(request: ApiRequest, run_id: DbId) -> Run:
    """Ask a run to stop; repeating it, or cancelling an ended run, is harmless."""
    run = run_get(user=request.auth, run_id=run_id)
    return run_cancel(run=run, user=request.auth)


@run_router.get(
    "/{run_id}/results", response={200: PagedResultRowOut, **ERRORS_READ_FILTERED}
)
def list_results(
    request: ApiRequest,
    run_id: DbId,
    filters: Query[ResultFilterIn],
    ninja_pagination: Query[BoundedPageNumberPagination.Input],
) -> HttpResponse:
    """A run's results in dataset order, filtered (the filters combine).

    With status pending or skipped: the items that have no result, one row each.
    """
    asked = filters.model_dump()
    # What the page is keyed by besides its run: the filters and the page.
    query = (
        tuple(sorted(filters.model_dump(mode="json").items())),
        PAGES.bounds(ninja_pagination),
    )

    def build() -> Any:
        run = run_get(user=request.auth, run_id=run_id)
        chosen = ResultFilters.parse(asked, run=run)
        found = result_rows(run=run, filters=chosen)
        rows: Rows | PendingRows = found
        if chosen.lists_items and chosen.status is not None:
            rows = PendingRows(found, chosen.status)
        return PAGES.paginate_queryset(rows, ninja_pagination, request)

    def read_state() -> tuple[Any, ...] | None:
        # The run's page state: its row and scoring passes, a going run's by
        # the second (what its results and scores are, and who reads them).
        # None (not cached): not a member (404), queued, or a scoring pass
        # at work.
        state = page_state.run_page_key(user_id=request.auth.pk, run_id=run_id)
        return None if state is None else (state, query)

    return pagecache.json_cached(
        request,
        name="results",
        key_data=read_state(),
        schema=PagedResultRowOut,
        build=build,
        still_current=read_state,
    )


EXPORT_RESPONSES: dict[str, Any] = {
    "200": {
        "description": "Every result in dataset order, streamed as a download: "
        "its item, epoch, output, status, error, latency, tokens, cost, attempts "
        "and, per scorer, `<scorer>.value`, `<scorer>.passed`, `<scorer>.error`, "
        "`<scorer>.reason`.",
        "content": {
            export.EXPORT_FORMATS[name].content_type.partition(";")[0]: {
                "schema": {"type": "string"}
            }
            for name in export.EXPORT_FORMATS
        },
    }
}


@run_router.get(
    "/{run_id}/export",
    response=READ_ERRORS,
    openapi_extra={"responses": EXPORT_RESPONSES},
)
def export_run(
    request: ApiRequest, run_id: DbId, format: Literal["jsonl", "csv"] = "jsonl"
) -> StreamingHttpResponse:
    """A run's results as JSON Lines or CSV (cells safe to open in a spreadsheet)."""
    run = run_get(user=request.auth, run_id=run_id)
    return export_response(run=run, format=format)


@run_router.get("/{run_id}/summary", response={200: RunSummaryOut, **READ_ERRORS})
def get_run_summary(request: ApiRequest, run_id: DbId) -> RunSummary:
    """How good the run was: per scorer, results, scores, errors, the pass rate
    with its 95% interval (Wilson's; with several epochs, clustered by item)
    and, with several epochs, pass@k and pass^k;
    latency percentiles, tokens, cost, counts per status and error kind."""
    run = run_for_figures(user=request.auth, run_id=run_id)
    return run_figures(run=run)[0]

"""The endpoints that compare runs, by scorer and item by item."""

from __future__ import annotations

from typing import Annotated, Literal

from django.http import StreamingHttpResponse
from ninja import Field, Router

from runs.analysis.compare import Comparison
from runs.compare.schemas import ComparisonOut
from runs.compare.selectors import comparison_pair, run_comparison, run_ids_parse
from runs.results.downloads import COMPARISON_COLUMNS, comparison_csv_response
from runs.web.api import READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId, ErrorOut, QueryText

compare_router = Router(tags=["compare"])


@compare_router.get("", response={200: ComparisonOut, 400: ErrorOut, **READ_ERRORS})
def compare_runs(request: ApiRequest, baseline: DbId, candidates: str) -> Comparison:
    """Each candidate run against the baseline, scorer by scorer: the paired
    table, a tested difference (Holm-adjusted) and a verdict.

    ``candidates`` is a comma-separated list of run ids.
    """
    candidate_ids = run_ids_parse(candidates, field="candidates")
    return run_comparison(
        user=request.auth, baseline_id=baseline, candidate_ids=candidate_ids
    )


@compare_router.get(
    "/items",
    response={400: ErrorOut, **READ_ERRORS},
    openapi_extra={
        "responses": {
            "200": {
                "description": "The paired items of (candidate, scorer) as CSV: "
                + ", ".join(COMPARISON_COLUMNS),
                "content": {"text/csv": {"schema": {"type": "string"}}},
            }
        }
    },
)
def compare_items(
    request: ApiRequest,
    baseline: DbId,
    candidate: DbId,
    scorer: Annotated[QueryText, Field(max_length=100)],
    change: Literal["regressions", "improvements", "both_failed", "output_changed"]
    | None = None,
) -> StreamingHttpResponse:
    """Every paired item of one candidate and scorer against the baseline, as
    CSV (the comparison page's items table, whole); ``change`` filters it."""
    first, second = comparison_pair(
        user=request.auth, baseline_id=baseline, candidate_id=candidate, scorer=scorer
    )
    return comparison_csv_response(
        baseline=first, candidate=second, scorer=scorer, change=change
    )

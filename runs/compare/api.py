"""The endpoints that compare runs, by scorer and item by item."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.http import StreamingHttpResponse
from ninja import Field, Router
from ninja.errors import ValidationError

from runs.analysis.compare import Comparison
from runs.compare.planner import ALPHA, POWER
from runs.compare.schemas import ComparisonOut, PlanOut
from runs.compare.selectors import (
    PlanAsked,
    comparison_pair,
    run_comparison,
    run_ids_parse,
    run_plan,
)
from runs.errors import InvalidInput
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


plan_router = Router(tags=["compare"])


@plan_router.get("", response={200: PlanOut, **READ_ERRORS})
def plan(
    request: ApiRequest,
    delta: Annotated[float | None, Field(ge=-1, le=1)] = None,
    pass_rate: Annotated[float | None, Field(ge=0, le=1)] = None,
    discordance: Annotated[float | None, Field(gt=0, le=1)] = None,
    m: Annotated[int | None, Field(ge=1, le=10_000)] = None,
    power: Annotated[float, Field(gt=0, lt=1)] = POWER,
    alpha: Annotated[float, Field(gt=0, lt=1)] = ALPHA,
    baseline: DbId | None = None,
    candidates: str | None = None,
    candidate: DbId | None = None,
    scorer: Annotated[QueryText | None, Field(max_length=100)] = None,
) -> dict[str, Any]:
    """Paired items needed to detect a difference of pass rates ``delta``
    (candidate - baseline) with McNemar's exact test at ``power`` after Holm
    over ``m`` comparisons (level alpha / m), by exact enumeration.

    ``pass_rate`` is the baseline's; ``discordance`` the share of items whose
    verdict differs between the runs (default: as if independent). With
    ``baseline`` and ``candidates`` (comma-separated run ids) every figure not
    given comes from that comparison's row of ``candidate`` (default the
    first) and ``scorer`` (default the first pass/fail one): its pass rate,
    observed discordance, delta and number of rows (m), and the answer adds
    its paired items, the power it had and its own MDE. An impossible
    combination is a 422 naming the parameter.
    """
    asked = PlanAsked(delta, pass_rate, discordance, m, power, alpha)
    try:
        return run_plan(
            user=request.auth,
            baseline_id=baseline,
            candidates=candidates or (str(candidate) if candidate else None),
            candidate=candidate,
            scorer=scorer,
            asked=asked,
        ).as_dict()
    except InvalidInput as exc:  # the documented 422, naming the parameter
        where = ["query", exc.field or "query"]
        error = {"loc": where, "msg": exc.message, "type": "value_error"}
        raise ValidationError([error]) from exc

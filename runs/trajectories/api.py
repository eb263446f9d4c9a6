"""The endpoints of trajectories: a result's steps, page by page, and one
item's trajectories across runs, aligned."""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Field, Router

from runs.analysis.step_clusters import FailingSteps, failing_step_clusters
from runs.analysis.step_compare import StepComparison, compare_steps
from runs.results.selectors import run_get
from runs.results.trajectory import STEPS_PER_PAGE
from runs.trajectories.schemas import (
    FailingStepsOut,
    StepComparisonOut,
    TrajectoryDiffOut,
    TrajectoryOut,
)
from runs.trajectories.selectors import (
    DIFF_API_ROWS_PER_PAGE,
    diff_page,
    result_trajectory,
    trajectory_diff,
)
from runs.web.api import READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId, ErrorOut, QueryText

result_trajectory_router = Router(tags=["runs"])
run_steps_router = Router(tags=["runs"])
trajectory_router = Router(tags=["compare"])


@result_trajectory_router.get(
    "/{result_id}/trajectory", response={200: TrajectoryOut, **READ_ERRORS}
)
def get_result_trajectory(
    request: ApiRequest,
    result_id: DbId,
    page: Annotated[int, Field(ge=1, le=1_000_000)] = 1,
) -> dict[str, Any]:
    """A page of the result's steps (model and tool calls, in order; at most
    200 a page), with figures over all of them. A payload cut when stored
    holds the start of its JSON text and says so (``cut``, its full size)."""
    trajectory = result_trajectory(user=request.auth, result_id=result_id, page=page)
    result = trajectory.result
    return {
        "result": result.pk,
        "run": result.run_id,
        "item_index": result.item_index,
        "epoch": result.epoch,
        "totals": trajectory.totals,
        "page": trajectory.page.number,
        "pages": trajectory.page.paginator.num_pages,
        "per_page": STEPS_PER_PAGE,
        "steps": list(trajectory.page.object_list),
    }


@trajectory_router.get(
    "/diff", response={200: TrajectoryDiffOut, 400: ErrorOut, **READ_ERRORS}
)
def get_trajectory_diff(
    request: ApiRequest,
    item: DbId,
    runs: Annotated[QueryText, Field(max_length=300)],
    epoch: Annotated[int, Field(ge=0, le=100_000)] = 0,
    page: Annotated[int, Field(ge=1, le=1_000_000)] = 1,
) -> dict[str, Any]:
    """One item's trajectories in two or more runs (``runs``: ``1,2,3``, the
    first the reference), aligned: every run's steps aligned with the first
    run's by edit operations over each tool call's name and arguments' hash
    (model calls match each other). Each row gives, per run, the index of its
    step there (null: none), 200 rows a page; ``first_divergence`` is the
    first row where they differ. ``item`` is an item of one run's dataset; a
    run over another version pairs it by external id."""
    diff = trajectory_diff(user=request.auth, item_id=item, runs=runs, epoch=epoch)
    shown = diff_page(diff, page, DIFF_API_ROWS_PER_PAGE)
    return {
        "item": diff.item.pk,
        "item_index": diff.item.index,
        "external_id": diff.item.external_id,
        "epoch": diff.epoch,
        "columns": [
            {
                "run": column.run.pk,
                "result": column.result.pk if column.result else None,
                "steps": column.steps,
            }
            for column in diff.columns
        ],
        "first_divergence": diff.first_divergence,
        "row_count": len(diff.rows),
        "page": shown.number,
        "pages": shown.paginator.num_pages,
        "per_page": DIFF_API_ROWS_PER_PAGE,
        "rows": [
            {"row": number, "same": row.same, "cells": steps}
            for number, row, steps in shown.object_list
        ],
    }


@run_steps_router.get(
    "/{run_id}/failing-steps", response={200: FailingStepsOut, **READ_ERRORS}
)
def get_failing_steps(request: ApiRequest, run_id: DbId) -> FailingSteps:
    """The run's failing results (a failed call, or a failing score) grouped
    by their failing step: the first tool call of the trajectory that ended
    in an error, by tool, error type and masked error; biggest first."""
    return failing_step_clusters(run_get(user=request.auth, run_id=run_id))


@trajectory_router.get(
    "/compare", response={200: StepComparisonOut, 400: ErrorOut, **READ_ERRORS}
)
def get_step_comparison(
    request: ApiRequest, baseline: DbId, candidate: DbId
) -> StepComparison:
    """Steps and cost per item of ``candidate`` against ``baseline``: the
    paired items' means, the mean difference and Wilcoxon's signed-rank test
    (two-sided) of the differences."""
    return compare_steps(
        run_get(user=request.auth, run_id=baseline),
        run_get(user=request.auth, run_id=candidate),
    )

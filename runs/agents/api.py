"""The trajectory endpoint: a result's steps, page by page."""

from __future__ import annotations

from typing import Any

from ninja import Router

from runs.agents.schemas import TrajectoryOut
from runs.agents.selectors import STEPS_PAGE, result_trajectory
from runs.web.api import READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

trajectory_router = Router(tags=["results"])


@trajectory_router.get(
    "/{result_id}/trajectory", response={200: TrajectoryOut, **READ_ERRORS}
)
def get_trajectory(
    request: ApiRequest, result_id: DbId, offset: int = 0, limit: int = STEPS_PAGE
) -> dict[str, Any]:
    """A result's steps in order (model calls and tool calls), ``limit`` (at
    most 1,000) from ``offset``, with the counts of the whole trajectory."""
    trajectory = result_trajectory(
        user=request.auth, result_id=result_id, offset=offset, limit=limit
    )
    result = trajectory.result
    return {
        "result": result.pk,
        "run": result.run_id,
        "item_index": result.item_index,
        "epoch": result.epoch,
        "status": result.status,
        "count": trajectory.count,
        "tool_calls": trajectory.tool_calls,
        "tool_errors": trajectory.tool_errors,
        "offset": trajectory.offset,
        "limit": trajectory.limit,
        "steps": trajectory.steps,
    }

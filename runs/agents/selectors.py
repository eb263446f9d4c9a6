"""Reads of a result's trajectory, for the members of its project."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, Q

from runs.errors import NotFound
from runs.models import Result, Step
from runs.results.selectors import run_list

# A page of steps holds at most this many.
MAX_STEPS_PAGE = 1000
STEPS_PAGE = 200


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One page of a result's steps, with the counts of all of them."""

    result: Result
    count: int
    tool_calls: int
    tool_errors: int
    offset: int
    limit: int
    steps: list[Step]


def result_visible(*, user: User, result_id: int) -> Result:
    """A result of a run the user may see, or NotFound (as one that does not exist)."""
    result = (
        Result.objects.filter(pk=result_id, run__in=run_list(user=user))
        .only("pk", "run_id", "item_index", "epoch", "status")
        .first()
    )
    if result is None:
        raise NotFound(f"no result {result_id}")
    return result


def result_trajectory(
    *, user: User, result_id: int, offset: int = 0, limit: int = STEPS_PAGE
) -> Trajectory:
    """Steps ``offset`` to ``offset + limit`` of a result, in order."""
    result = result_visible(user=user, result_id=result_id)
    limit = max(1, min(limit, MAX_STEPS_PAGE))
    offset = max(0, offset)
    steps = Step.objects.filter(result_id=result.pk)
    tool = Q(kind=Step.Kind.TOOL)
    counts: dict[str, Any] = steps.aggregate(
        count=Count("id"),
        tool_calls=Count("id", filter=tool),
        tool_errors=Count("id", filter=tool & ~Q(error="")),
    )
    page = list(steps.order_by("index")[offset : offset + limit])
    return Trajectory(
        result=result,
        offset=offset,
        limit=limit,
        steps=page,
        count=counts["count"],
        tool_calls=counts["tool_calls"],
        tool_errors=counts["tool_errors"],
    )

"""The trajectory pages: the diff of one item's trajectories across runs (a
result's own trajectory is a section of its page: ``trajectory_section``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from runs.errors import InvalidInput
from runs.trajectories.selectors import (
    diff_page,
    epoch_number,
    trajectory_diff,
)
from runs.web.pages import query_id
from runs.web.requests import AuthedRequest

DIFF_TEMPLATE = "runs/trajectories/diff.html"


def diff_url(item: int, runs: list[int]) -> str:
    query = urlencode({"item": str(item), "runs": ",".join(map(str, runs))})
    return f"{reverse('runs:trajectory_diff')}?{query}"


@require_GET
def trajectory_diff_page(request: AuthedRequest) -> HttpResponse:
    try:
        diff = trajectory_diff(
            user=request.user,
            item_id=query_id(request.GET.get("item")),
            runs=request.GET.get("runs"),
            epoch=epoch_number(request.GET.get("epoch")),
        )
    except InvalidInput as exc:
        return render(request, DIFF_TEMPLATE, {"error": exc}, status=400)
    context: dict[str, Any] = {
        "diff": diff,
        "page": diff_page(diff, request.GET.get("page")),
    }
    return render(request, DIFF_TEMPLATE, context)

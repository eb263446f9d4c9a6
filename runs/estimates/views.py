"""The new-run form's estimate: a fragment fetched with htmx."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from runs.errors import InvalidInput
from runs.estimates.services import SAMPLE_MAX, estimate_sample, run_estimate
from runs.results.forms import RunForm
from runs.web.requests import AuthedRequest

FRAGMENT = "runs/estimates/_estimate.html"
SAMPLE_DEFAULT = 3


@require_POST
def run_estimate_fragment(request: AuthedRequest) -> HttpResponse:
    """The new-run form's figures, estimated (and a paid sample, when asked)."""
    form = RunForm(request.POST, user=request.user)
    context: dict[str, Any] = {
        "sample_default": SAMPLE_DEFAULT,
        "sample_max": SAMPLE_MAX,
    }
    if not form.is_valid():
        context["problem"] = "Choose a dataset, a target and valid options first."
        return render(request, FRAGMENT, context)
    arguments = form.run_arguments()
    del arguments["name"]
    try:
        if "sample" in request.POST:
            items = int(request.POST.get("sample") or SAMPLE_DEFAULT)
            context["sample"] = estimate_sample(
                user=request.user, items=items, **arguments
            )
        context["estimate"] = run_estimate(user=request.user, **arguments)
    except (InvalidInput, ValueError) as exc:
        context["problem"] = str(exc)
    return render(request, FRAGMENT, context)

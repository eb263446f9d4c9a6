"""Resuming a run from its page, with a new cost budget."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from runs import selectors
from runs.errors import Conflict, InvalidInput
from runs.resuming import run_resume
from runs.views import domain_errors


@domain_errors
@require_POST
def run_resume_view(request: HttpRequest, run_id: int) -> HttpResponse:
    """Run the run's skipped items, with the cost budget given (empty: none)."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    budget = request.POST.get("cost_budget", "").strip()
    try:
        run_resume(run=run, user=request.user, options={"cost_budget": budget})
    except (InvalidInput, Conflict) as exc:
        messages.error(request, f"Not resumed: {exc.message}")
    else:
        messages.success(request, "Resumed: the skipped items run now.")
    return redirect("runs:run_detail", run_id=run.pk)

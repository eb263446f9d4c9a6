"""The page that retries results inside a run."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from runs.errors import Conflict, InvalidInput
from runs.models import Result
from runs.results.selectors import SKIPPED, run_get
from runs.retry import services
from runs.retry.resume import run_resume
from runs.web.requests import AuthedRequest


@require_http_methods(["GET", "POST"])
def run_retry(request: AuthedRequest, run_id: int) -> HttpResponse:
    """GET: what a retry would run, to confirm; POST: start it."""
    run = run_get(user=request.user, run_id=run_id)
    data = request.POST if request.method == "POST" else request.GET
    cluster = data.get("cluster") or None
    statuses = data.getlist("status") or None
    try:
        plan = services.run_retry(
            run=run,
            user=request.user,
            statuses=statuses,
            cluster=cluster,
            dry_run=request.method != "POST",
        )
    except (InvalidInput, Conflict) as exc:
        context: dict[str, Any] = {"run": run, "error": exc, "cluster": cluster}
        status = 409 if isinstance(exc, Conflict) else 400
        return render(request, "runs/retry/run_retry.html", context, status=status)
    if request.method == "POST":
        if plan.launched:
            messages.success(
                request, f"Retrying {plan.items} items ({plan.results} results)."
            )
        else:
            messages.info(request, "Nothing to retry.")
        return redirect("runs:run_detail", run_id=run.pk)
    context = {
        "run": run,
        "plan": plan,
        "statuses": plan.statuses,
        "cluster": cluster,
        "choices": [*Result.Status.choices, (SKIPPED, "Skipped")],
    }
    return render(request, "runs/retry/run_retry.html", context)


@require_POST
def run_resume_view(request: AuthedRequest, run_id: int) -> HttpResponse:
    """Run the run's skipped items, with the cost budget given (empty: none)."""
    run = run_get(user=request.user, run_id=run_id)
    budget = request.POST.get("cost_budget", "").strip()
    try:
        run_resume(run=run, user=request.user, options={"cost_budget": budget})
    except InvalidInput as exc:
        messages.error(request, f"Not resumed: {exc.message}")
    except Conflict as exc:
        messages.error(request, f"Not resumed: {exc}")
    else:
        messages.success(request, "Resumed: the skipped items run now.")
    return redirect("runs:run_detail", run_id=run.pk)

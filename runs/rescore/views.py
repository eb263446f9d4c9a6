"""The pages that re-score a run and show its scoring passes."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from runs.access import Action, require
from runs.errors import Conflict, InvalidInput, NotFound
from runs.models import Run, ScoringPass
from runs.rescore import services
from runs.rescore.forms import RescoreForm
from runs.rescore.selectors import scoring_section
from runs.results.selectors import run_get, run_overview
from runs.web.forms import add_domain_error
from runs.web.requests import AuthedRequest


@require_http_methods(["GET", "POST"])
def run_rescore(request: AuthedRequest, run_id: int) -> HttpResponse:
    """GET: the scorers to run over the stored outputs; POST: start the pass."""
    run = run_get(user=request.user, run_id=run_id)
    require(request.user, run.project, Action.EDIT)
    form = RescoreForm(request.POST or None, run=run)
    status = 200
    error: Exception | None = None
    if request.method == "POST":
        try:
            plan = _rescore(request, run, form)
        except InvalidInput as exc:
            add_domain_error(form, exc)
            status = 400
        except Conflict as exc:
            error, status = exc, 409
        else:
            if plan is not None:
                messages.success(request, _started(plan))
                return redirect("runs:run_detail", run_id=run.pk)
            status = 400
    context = {
        "run": run,
        "form": form,
        "error": error,
        "results": services.run_results_to_score(run=run),
    }
    return render(request, "runs/rescore/run_rescore.html", context, status=status)


def _rescore(
    request: AuthedRequest, run: Run, form: RescoreForm
) -> services.RescorePlan | None:
    """Start the pass the form (or ``again``: an earlier pass) asks for."""
    again = request.POST.get("again", "")
    if again:
        earlier = ScoringPass.objects.filter(
            run=run, pk=int(again) if again.isdigit() else 0
        ).first()
        if earlier is None:
            raise NotFound(f"no scoring pass {again} of run {run.pk}")
        scorers: list[Any] = earlier.scorers
    elif form.is_valid():
        scorers = form.scorer_specs()
    else:
        return None
    return services.run_rescore(run=run, user=request.user, scorers=scorers)


def _started(plan: services.RescorePlan) -> str:
    names = ", ".join(spec["name"] for spec in plan.scorers)
    return (
        f"Re-scoring {plan.results} result{'s' if plan.results != 1 else ''} "
        f"with {names}; the target is not called."
    )


@require_GET
def run_scoring_passes(request: AuthedRequest, run_id: int) -> HttpResponse:
    """The run's scoring passes (the run page's section, refreshed while one runs)."""
    overview = run_overview(user=request.user, run_id=run_id)
    context = scoring_section(run=overview.run, overview=overview)
    response = render(request, "runs/rescore/_run_rescore.html", context)
    if request.headers.get("HX-Request") and not context["passes_active"]:
        # The pass has ended: the page's scores, summary and clusters change.
        response["HX-Refresh"] = "true"
    return response

"""The page of a run's LLM judges measured against people."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from runs.access import Action, can
from runs.errors import InvalidInput
from runs.judges.selectors import run_judge_agreement_get
from runs.judges.services import judge_thresholds_set
from runs.results.selectors import run_get
from runs.web.requests import AuthedRequest


class JudgeThresholdsForm(forms.Form):
    judge_kappa_threshold = forms.FloatField(
        min_value=0.0, max_value=1.0, label="Kappa threshold"
    )
    judge_min_items = forms.IntegerField(min_value=1, label="Minimum items")


@require_GET
def run_judges(request: AuthedRequest, run_id: int) -> HttpResponse:
    """Each llm_judge scorer of the run against each human scorer."""
    run = run_get(user=request.user, run_id=run_id)
    found = run_judge_agreement_get(user=request.user, run_id=run.pk)
    form = None
    if can(request.user, run.project, Action.MANAGE):
        form = JudgeThresholdsForm(
            initial={
                "judge_kappa_threshold": run.project.judge_kappa_threshold,
                "judge_min_items": run.project.judge_min_items,
            }
        )
    context = {"run": run, "found": found, "form": form}
    return render(request, "runs/judges/judges.html", context)


@require_POST
def run_judges_thresholds(request: AuthedRequest, run_id: int) -> HttpResponse:
    """Set the project's calibration thresholds from the judges page (admins)."""
    run = run_get(user=request.user, run_id=run_id)
    form = JudgeThresholdsForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(map(str, errors))}")
        return redirect("runs:run_judges", run_id=run.pk)
    try:
        judge_thresholds_set(
            project=run.project,
            user=request.user,
            kappa_threshold=form.cleaned_data["judge_kappa_threshold"],
            min_items=form.cleaned_data["judge_min_items"],
        )
    except InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Calibration thresholds saved.")
    return redirect("runs:run_judges", run_id=run.pk)

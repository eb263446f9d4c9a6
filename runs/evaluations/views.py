"""The evaluation pages: a project's list, one evaluation (its trend, runs,
schedules and history), the form, and the buttons."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runs.access import Action, can, require
from runs.errors import InvalidInput
from runs.evaluations import schedules, selectors, services
from runs.evaluations.forms import (
    EvaluationForm,
    ScheduleForm,
    evaluation_edit_form,
)
from runs.models import Evaluation
from runs.projects.selectors import project_get
from runs.web.forms import add_domain_error, submitted
from runs.web.requests import AuthedRequest

# Items a paid sample sends, as the new-run form's does.
SAMPLE_DEFAULT = 3


@require_GET
def evaluation_list(request: AuthedRequest, project_id: int) -> HttpResponse:
    project = project_get(user=request.user, project_id=project_id)
    evaluations = selectors.evaluation_list(user=request.user, project_id=project.pk)
    context = {
        "project": project,
        "evaluations": evaluations,
        "can_edit": can(request.user, project, Action.EDIT),
    }
    return render(request, "runs/evaluations/evaluation_list.html", context)


def _save(form: EvaluationForm, request: AuthedRequest, evaluation: Any) -> Any:
    arguments = form.evaluation_arguments()
    if evaluation is None:
        project = arguments["dataset"].project
        return services.evaluation_create(
            user=request.user, project=project, **arguments
        )
    return services.evaluation_update(
        evaluation=evaluation, user=request.user, **arguments
    )


@require_http_methods(["GET", "POST"])
def evaluation_new(request: AuthedRequest) -> HttpResponse:
    form = EvaluationForm(request.POST or None, user=request.user)
    return _form_page(request, form, None)


@require_http_methods(["GET", "POST"])
def evaluation_edit(request: AuthedRequest, evaluation_id: int) -> HttpResponse:
    evaluation = selectors.evaluation_get(
        user=request.user, evaluation_id=evaluation_id
    )
    require(request.user, evaluation.project, Action.EDIT)
    form = evaluation_edit_form(
        request.POST or None, user=request.user, evaluation=evaluation
    )
    return _form_page(request, form, evaluation)


def _form_page(
    request: AuthedRequest, form: EvaluationForm, evaluation: Evaluation | None
) -> HttpResponse:
    saved = submitted(
        form, lambda: _save(form, request, evaluation), conflict_field="name"
    )
    if saved is not None:
        messages.success(request, f"The evaluation {saved.name!r} is saved.")
        return redirect("runs:evaluation_detail", evaluation_id=saved.pk)
    context = {"form": form, "evaluation": evaluation}
    return render(request, "runs/evaluations/evaluation_form.html", context)


@require_GET
def evaluation_detail(request: AuthedRequest, evaluation_id: int) -> HttpResponse:
    evaluation = selectors.evaluation_get(
        user=request.user, evaluation_id=evaluation_id
    )
    return _detail_page(request, evaluation, ScheduleForm())


def _detail_page(
    request: AuthedRequest,
    evaluation: Evaluation,
    schedule_form: ScheduleForm,
    status: int = 200,
) -> HttpResponse:
    plans = list(evaluation.schedules.all())
    context = {
        "evaluation": evaluation,
        "can_edit": can(request.user, evaluation.project, Action.EDIT),
        "trends": selectors.evaluation_trend(evaluation=evaluation),
        "runs": selectors.evaluation_runs(evaluation=evaluation),
        "baseline": services.evaluation_baseline(evaluation),
        "next_estimate": selectors.evaluation_next_estimate(
            user=request.user, evaluation=evaluation
        ),
        "schedules": selectors.schedule_next_ticks(plans, now=timezone.now()),
        "ticks": selectors.evaluation_ticks(evaluation=evaluation),
        "changes": evaluation.changes.select_related("user")[:50],
        "schedule_form": schedule_form,
        "sample_default": SAMPLE_DEFAULT,
    }
    return render(
        request, "runs/evaluations/evaluation_detail.html", context, status=status
    )


@require_POST
def evaluation_run_now(request: AuthedRequest, evaluation_id: int) -> HttpResponse:
    evaluation = selectors.evaluation_get(
        user=request.user, evaluation_id=evaluation_id
    )
    try:
        run = services.evaluation_run(evaluation=evaluation, user=request.user)
    except InvalidInput as exc:
        messages.error(request, f"The evaluation could not start: {exc}")
        return redirect("runs:evaluation_detail", evaluation_id=evaluation.pk)
    return redirect("runs:run_detail", run_id=run.pk)


@require_POST
def evaluation_sample(request: AuthedRequest, evaluation_id: int) -> HttpResponse:
    evaluation = selectors.evaluation_get(
        user=request.user, evaluation_id=evaluation_id
    )
    try:
        items = int(request.POST.get("items") or SAMPLE_DEFAULT)
        run = services.evaluation_sample(
            evaluation=evaluation, user=request.user, items=items
        )
    except ValueError:
        messages.error(request, "No sample was sent: items must be a whole number")
    except InvalidInput as exc:
        what = "items" if exc.field == "sample" else exc.field or ""
        messages.error(request, f"No sample was sent: {what} {exc.message}")
    else:
        messages.success(
            request,
            f"Run #{run.pk} sends {run.total} item{pluralize(run.total)} through "
            "the target (charged as any run); the next run's estimate reads it "
            "once it ends.",
        )
    return redirect("runs:evaluation_detail", evaluation_id=evaluation.pk)


@require_POST
def evaluation_delete(request: AuthedRequest, evaluation_id: int) -> HttpResponse:
    evaluation = selectors.evaluation_get(
        user=request.user, evaluation_id=evaluation_id
    )
    services.evaluation_delete(evaluation=evaluation, user=request.user)
    messages.success(request, f"The evaluation {evaluation.name!r} is deleted.")
    return redirect("runs:evaluation_list", project_id=evaluation.project_id)


@require_POST
def evaluation_schedule_add(request: AuthedRequest, evaluation_id: int) -> HttpResponse:
    evaluation = selectors.evaluation_get(
        user=request.user, evaluation_id=evaluation_id
    )
    require(request.user, evaluation.project, Action.EDIT)
    form = ScheduleForm(request.POST)
    if form.is_valid():
        try:
            schedules.schedule_add(
                evaluation=evaluation,
                user=request.user,
                cron=form.cleaned_data["cron"],
                timezone_name=form.cleaned_data["timezone"],
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            messages.success(request, "The schedule is added.")
            return redirect("runs:evaluation_detail", evaluation_id=evaluation.pk)
    return _detail_page(request, evaluation, form, status=400)


@require_POST
def evaluation_schedule_remove(
    request: AuthedRequest, evaluation_id: int, schedule_id: int
) -> HttpResponse:
    evaluation = selectors.evaluation_get(
        user=request.user, evaluation_id=evaluation_id
    )
    schedule = selectors.schedule_get(evaluation=evaluation, schedule_id=schedule_id)
    schedules.schedule_remove(schedule=schedule, user=request.user)
    messages.success(request, "The schedule is removed.")
    return redirect("runs:evaluation_detail", evaluation_id=evaluation.pk)

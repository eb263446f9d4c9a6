"""The target pages: the list, a target, its deletion, and trying it."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from runs.access import Action, can, projects_where, require
from runs.errors import InvalidInput, TooManyRequests
from runs.models import Target
from runs.targets import selectors, services
from runs.targets.forms import TargetForm, TargetTryForm, target_edit_form
from runs.targets.selectors import target_config_summary, target_get, target_runs
from runs.targets.services import target_create, target_update
from runs.targets.trial import TargetTry
from runs.web.forms import add_domain_error, submitted
from runs.web.requests import AuthedRequest


@require_http_methods(["GET", "POST"])
def target_list(request: AuthedRequest) -> HttpResponse:
    form = TargetForm(request.POST or None, user=request.user)
    target = submitted(
        form,
        lambda: target_create(user=request.user, **form.target_arguments()),
        conflict_field="name",
    )
    if target is not None:
        messages.success(request, f"The target {target.name!r} is created.")
        return redirect("runs:target_list")
    targets = selectors.target_list(user=request.user).order_by("project__name", "name")
    context = {
        "form": form,
        "targets": [(target, target_config_summary(target)) for target in targets],
        "can_edit": projects_where(request.user, Action.EDIT).exists(),
    }
    return render(request, "runs/targets/target_list.html", context)


def _target_page(
    request: AuthedRequest,
    target: Target,
    *,
    form: Any = None,
    try_form: TargetTryForm | None = None,
    outcome: TargetTry | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "target": target,
        "can_edit": can(request.user, target.project, Action.EDIT),
        "form": form or target_edit_form(None, user=request.user, target=target),
        "try_form": try_form or TargetTryForm(),
        "outcome": outcome,
        "runs": target_runs(target=target),
    }
    return render(request, "runs/targets/target_detail.html", context, status=status)


@require_http_methods(["GET", "POST"])
def target_detail(request: AuthedRequest, target_id: int) -> HttpResponse:
    """The target page; a POST saves the edit form."""
    target = target_get(user=request.user, target_id=target_id)
    if request.method == "GET":
        return _target_page(request, target)
    require(request.user, target.project, Action.EDIT)
    form = target_edit_form(request.POST, user=request.user, target=target)
    saved = submitted(
        form,
        lambda: target_update(
            target=target,
            user=request.user,
            name=form.cleaned_data["name"],
            config=form.target_arguments()["config"],
        ),
        conflict_field="name",
    )
    if saved is not None:
        messages.success(request, "The target is saved.")
        return redirect("runs:target_detail", target_id=target.pk)
    target.refresh_from_db()
    return _target_page(request, target, form=form)


@require_POST
def target_delete(request: AuthedRequest, target_id: int) -> HttpResponse:
    target = target_get(user=request.user, target_id=target_id)
    services.target_delete(target=target, user=request.user)
    messages.success(
        request, f"The target {target.name!r} is deleted; its runs keep their copy."
    )
    if request.headers.get("HX-Request"):
        return HttpResponse(
            status=204, headers={"HX-Redirect": reverse("runs:target_list")}
        )
    return redirect("runs:target_list")


@require_POST
async def target_try(request: AuthedRequest, target_id: int) -> HttpResponse:
    """Send one test input to the target and show the answer or the error.

    A coroutine: the server's worker threads are not held while the target
    answers (evalsite/handlers.py serves it on the event loop).
    """
    form = TargetTryForm(request.POST)
    outcome, refused = None, None
    # The service is asked even when the form has errors: it refuses a
    # non-editor first, and checks the input again itself.
    valid = form.is_valid()
    text = form.cleaned_data["input"] if valid else request.POST.get("input", "")
    try:
        outcome = await services.target_try(
            target_id=target_id, user=await request.auser(), text=text
        )
    except InvalidInput as exc:
        if valid:
            add_domain_error(form, exc)
    except TooManyRequests as exc:
        form.add_error(None, exc.message)
        refused = exc
    return await _try_response(request, target_id, form, outcome, refused)


@sync_to_async
def _try_response(
    request: AuthedRequest,
    target_id: int,
    form: TargetTryForm,
    outcome: TargetTry | None,
    refused: TooManyRequests | None,
) -> HttpResponse:
    target = target_get(user=request.user, target_id=target_id)
    status = refused.status_code if refused else 200
    if request.headers.get("HX-Request"):
        context = {"target": target, "try_form": form, "outcome": outcome}
        response = render(
            request, "runs/targets/_target_try.html", context, status=status
        )
    else:
        response = _target_page(
            request, target, try_form=form, outcome=outcome, status=status
        )
    if refused:
        response["Retry-After"] = str(refused.retry_after)
    return response

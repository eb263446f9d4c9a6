"""Pages for projects and their members, the user's API keys, and one target.

Thin like ``views.py``: read through a selector, write through one service;
NotFound and Forbidden become 404 and 403 in ``domain_errors``.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runs import selectors, services
from runs.access import ROLE_RANK, require_role, role_of
from runs.errors import Conflict, InvalidInput, TooManyRequests
from runs.forms import add_domain_error, target_edit_form
from runs.forms_projects import (
    ApiKeyForm,
    MemberAddForm,
    MemberRoleForm,
    ProjectForm,
    TargetTryForm,
)
from runs.models import Membership, Target
from runs.targets.trial import TargetTry
from runs.views import domain_errors

# -- projects --------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def project_list(request: HttpRequest) -> HttpResponse:
    form = ProjectForm(request.POST or None)
    if form.is_bound and form.is_valid():
        try:
            project = services.project_create(owner=request.user, **form.cleaned_data)
        except InvalidInput as exc:
            add_domain_error(form, exc)
        except Conflict as exc:
            form.add_error("name", str(exc))
        else:
            return redirect("runs:project_detail", project_id=project.pk)
    context = {"form": form, "projects": selectors.project_list(user=request.user)}
    return render(request, "runs/project_list.html", context)


def _project_page(
    request: HttpRequest, project_id: int, *, invite: MemberAddForm | None = None
) -> HttpResponse:
    overview = selectors.project_overview(user=request.user, project_id=project_id)
    context = {
        "overview": overview,
        "project": overview.project,
        "invite": invite or MemberAddForm(),
        "roles": Membership.Role.choices,
    }
    return render(request, "runs/project_detail.html", context)


@domain_errors
@require_GET
def project_detail(request: HttpRequest, project_id: int) -> HttpResponse:
    return _project_page(request, project_id)


@domain_errors
@require_POST
def project_member_add(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get(user=request.user, project_id=project_id)
    require_role(request.user, project, Membership.Role.ADMIN)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            membership = services.membership_add(
                project=project, actor=request.user, **form.cleaned_data
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        except Conflict as exc:
            form.add_error("user", str(exc))
        else:
            messages.success(
                request,
                f"{membership.user.get_username()} joined {project} as "
                f"{membership.get_role_display().lower()}.",
            )
            return redirect("runs:project_detail", project_id=project.pk)
    return _project_page(request, project_id, invite=form)


@domain_errors
@require_POST
def project_member_update(
    request: HttpRequest, project_id: int, user_id: int
) -> HttpResponse:
    project = selectors.project_get(user=request.user, project_id=project_id)
    form = MemberRoleForm(request.POST)
    role = form.cleaned_data["role"] if form.is_valid() else request.POST.get("role")
    try:
        membership = services.membership_update(
            project=project, actor=request.user, user_id=user_id, role=role or ""
        )
    except InvalidInput as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"{membership.user.get_username()} is now "
            f"{membership.get_role_display().lower()}.",
        )
    return redirect("runs:project_detail", project_id=project.pk)


@domain_errors
@require_POST
def project_member_remove(
    request: HttpRequest, project_id: int, user_id: int
) -> HttpResponse:
    project = selectors.project_get(user=request.user, project_id=project_id)
    try:
        services.membership_remove(project=project, actor=request.user, user_id=user_id)
    except InvalidInput as exc:
        messages.error(request, exc.message)
        return redirect("runs:project_detail", project_id=project.pk)
    if user_id == request.user.pk:
        messages.success(request, f"You left {project}.")
        return redirect("runs:project_list")
    messages.success(request, "The member was removed.")
    return redirect("runs:project_detail", project_id=project.pk)


# -- API keys --------------------------------------------------------------------


@never_cache
@require_http_methods(["GET", "POST"])
def account_keys(request: HttpRequest) -> HttpResponse:
    form = ApiKeyForm(request.POST or None)
    created = plain = None
    if form.is_bound and form.is_valid():
        try:
            created, plain = services.api_key_create(
                user=request.user, name=form.cleaned_data["name"]
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            form = ApiKeyForm()
    # The plain key is in this one response only: it is never stored, and
    # never_cache keeps it out of every cache.
    context = {
        "form": form,
        "keys": selectors.api_key_list(user=request.user),
        "created": created,
        "plain_key": plain,
    }
    return render(request, "runs/account_keys.html", context)


@domain_errors
@require_POST
def account_key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    key = services.api_key_revoke(user=request.user, key_id=key_id)
    messages.success(request, f"The key {key.name!r} ({key.prefix}…) is revoked.")
    return redirect("runs:account_keys")


# -- one target: edit, delete, try -----------------------------------------------


def _target_page(
    request: HttpRequest,
    target: Target,
    *,
    form: Any = None,
    try_form: TargetTryForm | None = None,
    outcome: TargetTry | None = None,
    status: int = 200,
) -> HttpResponse:
    role = role_of(request.user, target.project)
    can_edit = role is not None and ROLE_RANK[role] >= ROLE_RANK[Membership.Role.EDITOR]
    context = {
        "target": target,
        "can_edit": can_edit,
        "form": form or target_edit_form(None, user=request.user, target=target),
        "try_form": try_form or TargetTryForm(),
        "outcome": outcome,
        "runs": selectors.target_runs(target=target),
    }
    return render(request, "runs/target_detail.html", context, status=status)


@domain_errors
@require_http_methods(["GET", "POST"])
def target_detail(request: HttpRequest, target_id: int) -> HttpResponse:
    """The target page; a POST saves the edit form."""
    target = selectors.target_get(user=request.user, target_id=target_id)
    if request.method == "GET":
        return _target_page(request, target)
    require_role(request.user, target.project, Membership.Role.EDITOR)
    form = target_edit_form(request.POST, user=request.user, target=target)
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.target_update(
                target=target,
                user=request.user,
                name=data["name"],
                config=form.target_arguments()["config"],
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        except Conflict as exc:
            form.add_error("name", str(exc))
        else:
            messages.success(request, "The target is saved.")
            return redirect("runs:target_detail", target_id=target.pk)
    target.refresh_from_db()
    return _target_page(request, target, form=form)


@domain_errors
@require_POST
def target_delete(request: HttpRequest, target_id: int) -> HttpResponse:
    target = selectors.target_get(user=request.user, target_id=target_id)
    services.target_delete(target=target, user=request.user)
    messages.success(
        request, f"The target {target.name!r} is deleted; its runs keep their copy."
    )
    if request.headers.get("HX-Request"):
        return HttpResponse(
            status=204, headers={"HX-Redirect": reverse("runs:target_list")}
        )
    return redirect("runs:target_list")


@domain_errors
@require_POST
async def target_try(request: HttpRequest, target_id: int) -> HttpResponse:
    """Send one test input to the target and show the answer or the error.

    A coroutine: the server's worker threads are not held while the target
    answers (evalsite/handlers.py serves it on the event loop).
    """
    form = TargetTryForm(request.POST)
    outcome, refused = None, None
    if form.is_valid():
        try:
            outcome = await services.target_try(
                target_id=target_id,
                user=await request.auser(),
                text=form.cleaned_data["input"],
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        except TooManyRequests as exc:
            form.add_error(None, exc.message)
            refused = exc
    return await _try_response(request, target_id, form, outcome, refused)


@sync_to_async
def _try_response(
    request: HttpRequest,
    target_id: int,
    form: TargetTryForm,
    outcome: TargetTry | None,
    refused: TooManyRequests | None,
) -> HttpResponse:
    target = selectors.target_get(user=request.user, target_id=target_id)
    require_role(request.user, target.project, Membership.Role.EDITOR)
    status = refused.status_code if refused else 200
    if request.headers.get("HX-Request"):
        context = {"target": target, "try_form": form, "outcome": outcome}
        response = render(request, "runs/_target_try.html", context, status=status)
    else:
        response = _target_page(
            request, target, try_form=form, outcome=outcome, status=status
        )
    if refused:
        response["Retry-After"] = str(refused.retry_after)
    return response

"""The pages of projects, their members and secrets, and a user's API keys."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runs.access import Action, can
from runs.errors import Conflict, InvalidInput
from runs.models import Membership
from runs.projects import selectors, services
from runs.projects.forms import (
    ApiKeyForm,
    MemberAddForm,
    MemberRoleForm,
    ProjectForm,
    SecretForm,
)
from runs.projects.selectors import api_key_list, project_get, project_overview
from runs.records import pagecache
from runs.secrets import store
from runs.web.forms import add_domain_error, form_saved, submitted
from runs.web.pages import posted
from runs.web.requests import AuthedRequest


@require_http_methods(["GET", "POST"])
def project_secrets(request: AuthedRequest, project_id: int) -> HttpResponse:
    # The form is an admin's: anyone else is refused before it is read, as on
    # the members' form, rather than shown its errors.
    project = project_get(
        user=request.user, project_id=project_id, action=posted(request, Action.MANAGE)
    )
    form = SecretForm(request.POST or None)
    stored = form_saved(form, store.secret_set, project=project, user=request.user)
    if stored is not None:
        secret, created = stored
        verb = "added" if created else "updated"
        messages.success(request, f"Secret {secret.name} {verb}.")
        return redirect("runs:project_secrets", project_id=project.pk)
    context = {
        "project": project,
        "secrets": store.secret_list(project=project, user=request.user),
        "is_admin": can(request.user, project, Action.MANAGE),
        "form": form,
    }
    return render(request, "runs/projects/project_secrets.html", context)


@require_POST
def project_secret_delete(
    request: AuthedRequest, project_id: int, name: str
) -> HttpResponse:
    project = project_get(user=request.user, project_id=project_id)
    store.secret_delete(project=project, user=request.user, name=name)
    messages.success(request, f"Secret {name} deleted.")
    return redirect("runs:project_secrets", project_id=project.pk)


@require_http_methods(["GET", "POST"])
def project_list(request: AuthedRequest) -> HttpResponse:
    form = ProjectForm(request.POST or None)
    project = form_saved(
        form, services.project_create, owner=request.user, conflict_field="name"
    )
    if project is not None:
        return redirect("runs:project_detail", project_id=project.pk)
    projects = selectors.project_rows(user_id=request.user.pk)
    # A plain view is cached under its rows (every column it shows); a form
    # sent back with its errors is not.
    return pagecache.render_cached(
        request,
        "runs/projects/project_list.html",
        lambda: ({"form": form, "projects": projects}, 200),
        key_data=None
        if form.is_bound
        else tuple(tuple(row.values()) for row in projects),
    )


def _project_page(
    request: AuthedRequest, project_id: int, *, invite: MemberAddForm | None = None
) -> HttpResponse:
    overview = project_overview(user=request.user, project_id=project_id)
    context = {
        "overview": overview,
        "project": overview.project,
        "invite": invite or MemberAddForm(),
        "roles": Membership.Role.choices,
    }
    return render(request, "runs/projects/project_detail.html", context)


@require_GET
def project_detail(request: AuthedRequest, project_id: int) -> HttpResponse:
    return _project_page(request, project_id)


@require_POST
def project_member_add(request: AuthedRequest, project_id: int) -> HttpResponse:
    project = project_get(user=request.user, project_id=project_id)
    form = MemberAddForm(request.POST)
    # The service is asked even when the form has errors: it refuses a
    # non-admin first, and checks the user and the role again itself.
    data = form.cleaned_data if form.is_valid() else _member_fields(request)
    try:
        membership = services.membership_add(
            project=project, actor=request.user, **data
        )
    except InvalidInput as exc:
        if not form.errors:
            add_domain_error(form, exc)
    except Conflict as exc:
        form.add_error("user", str(exc))
    else:
        messages.success(
            request, f"{_member(membership)} joined {project} as {_role(membership)}."
        )
        return redirect("runs:project_detail", project_id=project.pk)
    return _project_page(request, project_id, invite=form)


def _member(membership: Membership) -> str:
    return membership.user.get_username()


def _role(membership: Membership) -> str:
    return membership.get_role_display().lower()


def _member_fields(request: AuthedRequest) -> dict[str, str]:
    return {
        "user": request.POST.get("user", ""),
        "role": request.POST.get("role", ""),
    }


@require_POST
def project_member_update(
    request: AuthedRequest, project_id: int, user_id: int
) -> HttpResponse:
    project = project_get(user=request.user, project_id=project_id)
    form = MemberRoleForm(request.POST)
    role = form.cleaned_data["role"] if form.is_valid() else request.POST.get("role")
    try:
        membership = services.membership_update(
            project=project, actor=request.user, user_id=user_id, role=role or ""
        )
    except InvalidInput as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{_member(membership)} is now {_role(membership)}.")
    return redirect("runs:project_detail", project_id=project.pk)


@require_POST
def project_member_remove(
    request: AuthedRequest, project_id: int, user_id: int
) -> HttpResponse:
    project = project_get(user=request.user, project_id=project_id)
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


@never_cache
@require_http_methods(["GET", "POST"])
def account_keys(request: AuthedRequest) -> HttpResponse:
    form = ApiKeyForm(request.POST or None)
    created = plain = None
    made = submitted(
        form,
        lambda: services.api_key_create(
            user=request.user, name=form.cleaned_data["name"]
        ),
    )
    if made is not None:
        created, plain = made
        form = ApiKeyForm()
    # The plain key is in this one response only: it is never stored, and
    # never_cache keeps it out of every cache.
    context = {
        "form": form,
        "keys": api_key_list(user=request.user),
        "created": created,
        "plain_key": plain,
    }
    return render(request, "runs/projects/account_keys.html", context)


@require_POST
def account_key_revoke(request: AuthedRequest, key_id: int) -> HttpResponse:
    key = services.api_key_revoke(user=request.user, key_id=key_id)
    messages.success(request, f"The key {key.name!r} ({key.prefix}…) is revoked.")
    return redirect("runs:account_keys")

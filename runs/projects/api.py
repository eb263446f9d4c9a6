"""The endpoints of projects, members, API keys and project secrets."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import (
    Query,  # noqa: F401
    Router,
    Status,
)
from ninja.security import HttpBearer

from runs.errors import Forbidden
from runs.models import ApiKey, Membership, Project, ProjectSecret
from runs.projects.schemas import (
    ApiKeyCreatedOut,
    ApiKeyIn,
    ApiKeyOut,
    MemberIn,
    MemberOut,
    MemberPatch,
    ProjectIn,
    ProjectOut,
    SecretIn,
    SecretOut,
)
from runs.projects.selectors import (
    api_key_list,
    membership_list,
    project_get,
    project_get_with_role,
    project_list,
)
from runs.projects.services import (
    api_key_authenticate,
    api_key_create,
    api_key_revoke,
    membership_add,
    membership_remove,
    membership_update,
    project_create,
)
from runs.secrets.store import secret_delete, secret_list, secret_set
from runs.web.api import ERRORS, READ_ERRORS, paginated
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

secret_router = Router(tags=["secrets"])


@secret_router.get(
    "/{project_id}/secrets", response={200: list[SecretOut], **READ_ERRORS}
)
def list_secrets(request: ApiRequest, project_id: DbId) -> QuerySet[ProjectSecret]:
    """The project's secrets: names, hosts and times, never values (any member)."""
    project = project_get(user=request.auth, project_id=project_id)
    return secret_list(project=project, user=request.auth)


@secret_router.put(
    "/{project_id}/secrets/{name}",
    response={200: SecretOut, 201: SecretOut, **ERRORS},
)
def set_secret(
    request: ApiRequest, project_id: DbId, name: str, payload: SecretIn
) -> Status[ProjectSecret]:
    """Create (201) or change (200) a secret; project admins only.

    The value is stored encrypted and never returned; targets name the secret
    in their configuration (``api_key_secret``), and it is sent only to the
    hosts it is bound to. A new secret needs both; a change may give either.
    """
    project = project_get(user=request.auth, project_id=project_id)
    secret, created = secret_set(
        project=project,
        user=request.auth,
        name=name,
        value=payload.value,
        hosts=payload.hosts,
    )
    return Status(201 if created else 200, secret)


@secret_router.delete("/{project_id}/secrets/{name}", response={204: None, **ERRORS})
def delete_secret(request: ApiRequest, project_id: DbId, name: str) -> Status[None]:
    """Delete a secret; project admins only. Runs that use it will fail to start."""
    project = project_get(user=request.auth, project_id=project_id)
    secret_delete(project=project, user=request.auth, name=name)
    return Status(204, None)


project_router = Router(tags=["projects"])
key_router = Router(tags=["keys"])


@project_router.get("", response={200: list[ProjectOut], **READ_ERRORS})
@paginated
def list_projects(request: ApiRequest) -> QuerySet[Project]:
    """Your projects, each with your role in it."""
    return project_list(user=request.auth)


@project_router.post("", response={201: ProjectOut, **ERRORS})
def create_project(request: ApiRequest, payload: ProjectIn) -> Status[Project]:
    """Create a project; you become its admin."""
    project = project_create(
        name=payload.name, description=payload.description, owner=request.auth
    )
    return Status(201, project_get_with_role(user=request.auth, project_id=project.pk))


@project_router.get("/{project_id}", response={200: ProjectOut, **READ_ERRORS})
def get_project(request: ApiRequest, project_id: DbId) -> Project:
    return project_get_with_role(user=request.auth, project_id=project_id)


@project_router.get(
    "/{project_id}/members", response={200: list[MemberOut], **READ_ERRORS}
)
@paginated
def list_members(request: ApiRequest, project_id: DbId) -> QuerySet[Membership]:
    """The project's members, admins first."""
    project = project_get(user=request.auth, project_id=project_id)
    return membership_list(project=project)


@project_router.post(
    "/{project_id}/members",
    response={201: MemberOut, **ERRORS},
)
def add_member(
    request: ApiRequest, project_id: DbId, payload: MemberIn
) -> Status[Membership]:
    """Add an existing user by username or email (project admins only)."""
    project = project_get(user=request.auth, project_id=project_id)
    membership = membership_add(
        project=project, actor=request.auth, user=payload.user, role=payload.role
    )
    return Status(201, membership)


@project_router.patch(
    "/{project_id}/members/{user_id}",
    response={200: MemberOut, **ERRORS},
)
def update_member(
    request: ApiRequest, project_id: DbId, user_id: DbId, payload: MemberPatch
) -> Membership:
    """Change a member's role (admins only); the last admin stays admin (400)."""
    project = project_get(user=request.auth, project_id=project_id)
    return membership_update(
        project=project, actor=request.auth, user_id=user_id, role=payload.role
    )


@project_router.delete(
    "/{project_id}/members/{user_id}",
    response={204: None, **ERRORS},
)
def remove_member(request: ApiRequest, project_id: DbId, user_id: DbId) -> Status[None]:
    """Remove a member (admins), or leave with your own id; never the last admin."""
    project = project_get(user=request.auth, project_id=project_id)
    membership_remove(project=project, actor=request.auth, user_id=user_id)
    return Status(204, None)


@key_router.get("", response={200: list[ApiKeyOut], **READ_ERRORS})
@paginated
def list_keys(request: ApiRequest) -> QuerySet[ApiKey]:
    """Your API keys, revoked ones included; never the keys themselves."""
    return api_key_list(user=request.auth)


@key_router.post("", response={201: ApiKeyCreatedOut, **ERRORS})
def create_key(
    request: ApiRequest, response: HttpResponse, payload: ApiKeyIn
) -> Status[ApiKey]:
    """Create a key; it is in this response only. Needs a session: a key cannot
    make keys, so that revoking a leaked key is enough."""
    if getattr(request, "api_key", None) is not None:
        raise Forbidden("an API key cannot create keys; sign in to create one")
    key, plain = api_key_create(user=request.auth, name=payload.name)
    # The plain key, for this response only (ApiKeyCreatedOut.key).
    key.key = plain  # type: ignore[attr-defined]  # not a field: never stored
    response["Cache-Control"] = "no-store"
    return Status(201, key)


@key_router.delete("/{key_id}", response={204: None, **ERRORS})
def revoke_key(request: ApiRequest, key_id: DbId) -> Status[None]:
    """Revoke one of your keys; it stops working at once."""
    api_key_revoke(user=request.auth, key_id=key_id)
    return Status(204, None)


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer evk_...``; no CSRF check, as no cookie is involved."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        key = api_key_authenticate(token)
        if key is None:
            return None
        request.user = key.user
        request.api_key = key  # type: ignore[attr-defined]  # read by create_key
        return key.user


def docs_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The schema and the docs page, for a session or an API key.

    Anonymous: 401 JSON for the schema (an API resource) and for clients that
    ask for JSON; the docs page sends a browser to the login page instead.
    """

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            key = (
                api_key_authenticate(token.strip())
                if scheme.lower() == "bearer"
                else None
            )
            if key is not None:
                request.user = key.user
            elif (
                request.resolver_match is not None
                and request.resolver_match.url_name == "openapi-view"
                and "json" not in request.headers.get("Accept", "")
            ):
                return redirect_to_login(request.get_full_path())
            else:
                return JsonResponse({"detail": "Unauthorized"}, status=401)
        return view(request, *args, **kwargs)

    return wrapper

"""Who may see and change what: everything is scoped to the user's projects."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from runs.errors import Forbidden, NotFound
from runs.models import Membership, Project

ROLE_RANK: dict[str, int] = {
    Membership.Role.VIEWER: 0,
    Membership.Role.EDITOR: 1,
    Membership.Role.ADMIN: 2,
}


def visible_projects(user: User | AnonymousUser) -> QuerySet[Project]:
    if not user.is_authenticated:
        return Project.objects.none()
    return Project.objects.filter(memberships__user=user)


def visible_project_ids(user: User | AnonymousUser) -> QuerySet[Any]:
    """The ids of the user's projects, for ``project_id__in=``.

    The same set as ``visible_projects`` (one membership per project and
    user), from one table: a subquery Django builds in about half the time.
    """
    if not user.is_authenticated:
        return Membership.objects.none().values("project_id")
    return Membership.objects.filter(user=user).values("project_id")


def editable_project_ids(user: User | AnonymousUser) -> QuerySet[Any]:
    """The ids of the projects where the user is an editor or an admin."""
    return visible_project_ids(user).filter(
        role__in=[Membership.Role.EDITOR, Membership.Role.ADMIN]
    )


def role_of(user: User | AnonymousUser, project: Project) -> str | None:
    if not user.is_authenticated:
        return None
    return (
        Membership.objects.filter(project=project, user=user)
        .values_list("role", flat=True)
        .first()
    )


def require_role(user: User | AnonymousUser, project: Project, role: str) -> str:
    """Raise NotFound for outsiders, Forbidden for members below ``role``."""
    actual = role_of(user, project)
    if actual is None:
        raise NotFound("no such project")
    if ROLE_RANK[actual] < ROLE_RANK[role]:
        raise Forbidden(f"this needs the {role} role in {project}; you are {actual}")
    return actual


def editable_projects(user: User | AnonymousUser) -> QuerySet[Project]:
    if not user.is_authenticated:
        return Project.objects.none()
    return Project.objects.filter(
        memberships__user=user,
        memberships__role__in=[Membership.Role.EDITOR, Membership.Role.ADMIN],
    )

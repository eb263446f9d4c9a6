"""Who may do what in a project: one policy for every surface.

Each action names the least role it needs, in ``REQUIRED_ROLE``; ``can`` and
``require`` answer for one project, ``projects_where`` for all of a user's,
and ``roles_allowed`` gives the roles for a statement written in SQL. An
outsider (no membership) is told the project does not exist (NotFound), so
that its existence is not leaked; a member below the role is refused
(Forbidden). Staff and superusers get no more than their memberships give:
the dashboard's projects are their members' alone.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from runs.errors import Forbidden, NotFound
from runs.models import Membership, Project

User = AbstractBaseUser | AnonymousUser


class Action(enum.StrEnum):
    VIEW = "view"  # see the project and what it holds; leave it
    EDIT = "edit"  # datasets, targets and runs: create, change, run, delete
    MANAGE = "manage"  # members, secrets and the project's settings


REQUIRED_ROLE = MappingProxyType(
    {
        Action.VIEW: Membership.Role.VIEWER,
        Action.EDIT: Membership.Role.EDITOR,
        Action.MANAGE: Membership.Role.ADMIN,
    }
)

# Each role may do what every role below it may.
ROLE_RANK = MappingProxyType(
    {
        Membership.Role.VIEWER: 0,
        Membership.Role.EDITOR: 1,
        Membership.Role.ADMIN: 2,
    }
)


def roles_allowed(action: Action) -> list[str]:
    """The roles that may do ``action``, least first."""
    least = ROLE_RANK[REQUIRED_ROLE[action]]
    return [role for role, rank in ROLE_RANK.items() if rank >= least]


def allows(role: str | None, action: Action) -> bool:
    """Whether a member with ``role`` (None: no member) may do ``action``."""
    return role is not None and role in roles_allowed(action)


def role_of(user: User, project: Project) -> str | None:
    if not user.is_authenticated:
        return None
    return (
        Membership.objects.filter(project=project, user=user)
        .values_list("role", flat=True)
        .first()
    )


def can(user: User, project: Project, action: Action) -> bool:
    """Whether ``user`` may do ``action`` in ``project``."""
    return allows(role_of(user, project), action)


def require(user: User, project: Project, action: Action) -> str:
    """The user's role, if it allows ``action``; else NotFound for an outsider
    and Forbidden for a member below the role."""
    role = role_of(user, project)
    if role is None:
        raise NotFound("no such project")
    if not allows(role, action):
        needed = REQUIRED_ROLE[action]
        raise Forbidden(f"this needs the {needed} role in {project}; you are {role}")
    return role


def project_ids_where(user: User, action: Action) -> QuerySet[Any]:
    """The ids of the projects where the user may do ``action``, for
    ``project_id__in=``: a subquery of one table, which Django builds in about
    half the time of a join through the projects."""
    if not user.is_authenticated:
        return Membership.objects.none().values("project_id")
    memberships = Membership.objects.filter(user=user)
    if action is not Action.VIEW:  # any membership allows viewing
        memberships = memberships.filter(role__in=roles_allowed(action))
    return memberships.values("project_id")


def projects_where(user: User, action: Action) -> QuerySet[Project]:
    """The projects where the user may do ``action``."""
    if not user.is_authenticated:
        return Project.objects.none()
    if action is Action.VIEW:
        return Project.objects.filter(memberships__user=user)
    return Project.objects.filter(
        memberships__user=user, memberships__role__in=roles_allowed(action)
    )


def visible_projects(user: User) -> QuerySet[Project]:
    return projects_where(user, Action.VIEW)


def visible_project_ids(user: User) -> QuerySet[Any]:
    return project_ids_where(user, Action.VIEW)

"""Reads of projects, memberships and API keys."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import (
    Case,
    Count,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
)

from runs.access import ROLE_RANK, Action, allows, require, visible_projects
from runs.models import ApiKey, Dataset, Membership, Project, Run, Target
from runs.web.selectors import row_get

# The user of a request: signed in or anonymous.
AnyUser = User | AnonymousUser


def project_get(
    *, user: AnyUser, project_id: int, action: Action = Action.VIEW
) -> Project:
    """A project the user may see (and do ``action`` in): NotFound for an
    outsider, Forbidden for a member below the role."""
    project = row_get(visible_projects(user), pk=project_id, noun="project")
    if action is not Action.VIEW:
        require(user, project, action)
    return project


def project_list(*, user: AnyUser) -> QuerySet[Project]:
    """The user's projects, each with ``role`` (the user's) and ``member_count``."""
    if not user.is_authenticated:
        return Project.objects.none()
    role = Membership.objects.filter(project=OuterRef("pk"), user=user).values("role")
    members = (
        Membership.objects.filter(project=OuterRef("pk"))
        .values("project")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        visible_projects(user)
        .annotate(role=Subquery(role[:1]), member_count=Subquery(members[:1]))
        .order_by("name")
    )


def project_get_with_role(*, user: AnyUser, project_id: int) -> Project:
    """One of the user's projects, with ``role`` and ``member_count``."""
    return row_get(project_list(user=user), pk=project_id, noun="project")


def membership_list(*, project: Project) -> QuerySet[Membership]:
    """A project's members: admins first, then by username."""
    rank = Case(
        *(When(role=role, then=Value(-n)) for role, n in ROLE_RANK.items()),
        output_field=IntegerField(),
    )
    return (
        Membership.objects.filter(project=project)
        .select_related("user")
        .order_by(rank, "user__username")
    )


@dataclass(frozen=True, slots=True)
class ProjectOverview:
    project: Project
    role: str
    members: list[Membership]
    admin_count: int
    dataset_count: int
    target_count: int
    run_count: int

    @property
    def is_admin(self) -> bool:
        return allows(self.role, Action.MANAGE)


def project_overview(*, user: AnyUser, project_id: int) -> ProjectOverview:
    """A project with its members and what it holds, for one of its members."""
    project = project_get_with_role(user=user, project_id=project_id)
    members = list(membership_list(project=project))
    return ProjectOverview(
        project=project,
        role=project.role,  # type: ignore[attr-defined]  # annotated by project_list
        members=members,
        admin_count=sum(m.role == Membership.Role.ADMIN for m in members),
        dataset_count=Dataset.objects.filter(project=project).count(),
        target_count=Target.objects.filter(project=project).count(),
        run_count=Run.objects.filter(project=project).count(),
    )


def api_key_list(*, user: AnyUser) -> QuerySet[ApiKey]:
    """The user's own API keys, newest first; revoked ones included."""
    if not user.is_authenticated:
        return ApiKey.objects.none()
    return ApiKey.objects.filter(user=user).order_by("-created_at", "-pk")

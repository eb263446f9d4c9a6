"""Reads of projects, memberships and API keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from runs.records import compiled
from runs.records.compiled import Args
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
    return _with_role(visible_projects(user), user_id=user.pk)


def _with_role(projects: QuerySet[Project], *, user_id: int) -> QuerySet[Project]:
    role = Membership.objects.filter(project=OuterRef("pk"), user_id=user_id)
    members = (
        Membership.objects.filter(project=OuterRef("pk"))
        .values("project")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return projects.annotate(
        role=Subquery(role.values("role")[:1]), member_count=Subquery(members[:1])
    ).order_by("name")


def _project_rows(args: Args) -> QuerySet[Project, Any]:
    user_id = args.integer("user_id")
    projects = Project.objects.filter(memberships__user_id=user_id)
    return _with_role(projects, user_id=user_id).values(*PROJECT_ROW_COLUMNS)


# What the projects page shows of each: ``project_list``'s columns.
PROJECT_ROW_COLUMNS = (
    "pk",
    "name",
    "role",
    "member_count",
    "description",
    "created_at",
)


def project_rows(*, user_id: int) -> tuple[dict[str, Any], ...]:
    """``project_list`` as rows of ``PROJECT_ROW_COLUMNS`` (what its page
    shows, and a cache key of it), read in one compiled statement."""
    return tuple(
        compiled.rows(
            compiled.statement("project-rows", _project_rows), {"user_id": user_id}
        )
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

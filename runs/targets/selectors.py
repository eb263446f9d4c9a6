"""Reads of targets and of the runs that used one."""

from __future__ import annotations

from django.db.models import (
    QuerySet,
)

from runs.access import visible_project_ids
from runs.errors import NotFound
from runs.models import (
    Run,
    Target,
)
from runs.projects.selectors import User


def target_list(*, user: User, project_id: int | None = None) -> QuerySet[Target]:
    targets = Target.objects.filter(
        project_id__in=visible_project_ids(user)
    ).select_related("project")
    if project_id is not None:
        targets = targets.filter(project_id=project_id)
    return targets


def target_get(*, user: User, target_id: int) -> Target:
    try:
        return target_list(user=user).get(pk=target_id)
    except Target.DoesNotExist:
        raise NotFound(f"no target {target_id}") from None


def target_runs(*, target: Target, limit: int = 20) -> list[Run]:
    """The latest runs started from a stored target."""
    return list(
        Run.objects.filter(target=target)
        .select_related("dataset")
        .order_by("-created_at", "-pk")[:limit]
    )

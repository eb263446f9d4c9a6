"""Reads of targets and of the runs that used one."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from runs.models import Run, Target
from runs.web.selectors import row_get, visible_rows


def target_list(*, user: User, project_id: int | None = None) -> QuerySet[Target]:
    rows = visible_rows(Target, user=user, project_id=project_id)
    return rows.select_related("project")


def target_get(*, user: User, target_id: int) -> Target:
    return row_get(target_list(user=user), pk=target_id, noun="target")


def target_runs(*, target: Target, limit: int = 20) -> list[Run]:
    """The latest runs started from a stored target."""
    return list(
        Run.objects.filter(target=target)
        .select_related("dataset")
        .order_by("-created_at", "-pk")[:limit]
    )

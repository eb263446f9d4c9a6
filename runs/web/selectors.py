"""What the capabilities' reads share: rows of the projects a user can see."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, QuerySet

from runs.access import visible_project_ids
from runs.errors import NotFound


def visible_rows[M: Model](
    model: type[M], *, user: User | AnonymousUser, project_id: int | None = None
) -> QuerySet[M]:
    """The model's rows in the projects the user may see, or in one of them.

    Seeing a project is the one check: what a project holds is shown to each of
    its members, whatever the role.
    """
    rows = model._default_manager.filter(project_id__in=visible_project_ids(user))
    if project_id is not None:
        rows = rows.filter(project_id=project_id)
    return rows


def row_get[M: Model](rows: QuerySet[M], *, pk: int, noun: str) -> M:
    """The row ``pk`` of ``rows``, else NotFound: a row the user may not see is
    answered as one that does not exist."""
    try:
        return rows.get(pk=pk)
    except ObjectDoesNotExist:  # every model's DoesNotExist derives from it
        raise NotFound(f"no {noun} {pk}") from None

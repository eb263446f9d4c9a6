"""Fields and constraints that several models declare alike."""

from __future__ import annotations

from typing import Any, overload

from django.conf import settings
from django.db import models
from django.db.models import Q


@overload
def kept_null[M: models.Model](
    to: type[M], related_name: str | None = None
) -> models.ForeignKey[M | None]: ...


@overload
def kept_null(
    to: str, related_name: str | None = None
) -> models.ForeignKey[Any, Any]: ...


def kept_null(
    to: type[models.Model] | str, related_name: str | None = None
) -> models.ForeignKey[Any, Any]:
    """A row a row may name: emptied, not deleted with it, when that row goes."""
    return models.ForeignKey(
        to,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name=related_name,
    )


def user_kept_null(related_name: str | None = None) -> models.ForeignKey[Any, Any]:
    """A user a row names: emptied, not deleted with it, when the user goes."""
    return kept_null(settings.AUTH_USER_MODEL, related_name)


def unique(
    *fields: str, name: str, condition: Q | None = None
) -> models.UniqueConstraint:
    """One row at most for each value of ``fields`` (among the rows ``condition``
    holds for)."""
    return models.UniqueConstraint(fields=fields, name=name, condition=condition)

"""Writes of a project's judge calibration settings."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User

from runs.access import Action, require
from runs.errors import InvalidInput
from runs.models import Project

MAX_MIN_ITEMS = 1_000_000


def judge_thresholds_set(
    *,
    project: Project,
    user: User | AnonymousUser,
    kappa_threshold: Any = None,
    min_items: Any = None,
) -> Project:
    """Set the kappa a judge needs against people, and over how many items,
    to be calibrated (either may be left as it is); project admins only."""
    require(user, project, Action.MANAGE)
    if kappa_threshold is not None:
        if (
            not isinstance(kappa_threshold, int | float)
            or isinstance(kappa_threshold, bool)
            or not 0.0 <= kappa_threshold <= 1.0
        ):
            raise InvalidInput(
                "must be a number from 0 to 1", field="judge_kappa_threshold"
            )
        project.judge_kappa_threshold = float(kappa_threshold)
    if min_items is not None:
        if type(min_items) is not int or not 1 <= min_items <= MAX_MIN_ITEMS:
            raise InvalidInput(
                f"must be a whole number from 1 to {MAX_MIN_ITEMS}",
                field="judge_min_items",
            )
        project.judge_min_items = min_items
    project.save(update_fields=["judge_kappa_threshold", "judge_min_items"])
    return project

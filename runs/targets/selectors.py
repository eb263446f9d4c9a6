"""Reads of targets and of the runs that used one."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import User
from django.db.models import QuerySet

from runs.models import Run, Target
from runs.plugins import describe
from runs.targets import REGISTRY as TARGETS
from runs.web.selectors import row_get, visible_rows

# What a list shows of a target's configuration: its few values that differ
# from the defaults, the model and the endpoint first, each value shortened.
SUMMARY_FIRST = ("model", "base_url", "url")
SUMMARY_MAX_VALUES = 4
SUMMARY_MAX_CHARS = 40


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


def target_config_summary(target: Target) -> str:
    """A target's distinguishing configuration: ``model=x, base_url=host``.

    Only plain values that differ from their default, never one naming a
    secret; a URL shows only its host, so no path, query or credentials.
    """
    plugin = TARGETS.get(target.kind)
    if plugin is None:
        return ""
    hidden = set(plugin.secret_params())
    shown = [
        (param.name, _summary_value(value))
        for param in describe(plugin.Params)
        if param.name not in hidden
        and param.type != "json"
        and param.extra.get("widget") != "textarea"
        and (value := target.config.get(param.name)) not in (None, "", param.default)
    ]
    shown.sort(key=lambda pair: _summary_rank(pair[0]))
    return ", ".join(f"{name}={value}" for name, value in shown[:SUMMARY_MAX_VALUES])


def _summary_rank(name: str) -> int:
    return SUMMARY_FIRST.index(name) if name in SUMMARY_FIRST else len(SUMMARY_FIRST)


def _summary_value(value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        host = parts.hostname or ""
        return f"{host}:{parts.port}" if parts.port else host
    if len(text) > SUMMARY_MAX_CHARS:
        return text[: SUMMARY_MAX_CHARS - 1] + "\u2026"
    return text

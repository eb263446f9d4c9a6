"""Small display filters for the dashboard templates."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.dateparse import parse_datetime

register = template.Library()

STATUS_CLASSES = {
    "pending": "neutral",
    "running": "info",
    "completed": "ok",
    "completed_with_errors": "warn",
    "failed": "bad",
    "cancelled": "muted",
    "succeeded": "ok",
    "timed_out": "warn",
    "ok": "ok",
    "error": "bad",
    "timeout": "warn",
}


@register.filter
def status_class(status: str) -> str:
    return STATUS_CLASSES.get(status, "neutral")


@register.filter
def pretty(value: Any) -> str:
    """A string as it is; anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@register.filter
def compact(value: Any, limit: int = 120) -> str:
    """A one-line preview of a JSON value, cut at ``limit`` characters."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as ``1h 02m``, ``3m 05s`` or ``12s``."""
    if seconds is None:
        return "\u2013"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


@register.filter
def when(value: str | None) -> Any:
    """An ISO timestamp from the attempt log as a datetime (for ``|date``)."""
    return parse_datetime(value) if value else None

"""The run page's retry passes section."""

from __future__ import annotations

from typing import Any

from django import template

from runs.models import Run
from runs.retry.selectors import retry_section

register = template.Library()


@register.inclusion_tag("runs/retry/_retry_passes.html")
def retry_passes(run: Run) -> dict[str, Any]:
    return retry_section(run=run)

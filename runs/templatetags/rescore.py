"""The run page's scoring passes section."""

from __future__ import annotations

from typing import Any

from django import template

from runs.models import Run
from runs.rescore.selectors import scoring_section

register = template.Library()


@register.inclusion_tag("runs/rescore/_run_rescore.html", takes_context=True)
def scoring_passes(context: template.Context, run: Run) -> dict[str, Any]:
    return {
        **scoring_section(run=run, overview=context.get("overview")),
        "csrf_token": context.get("csrf_token"),
    }

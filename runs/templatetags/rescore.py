"""The run page's scoring passes section."""

from __future__ import annotations

from typing import Any

from django import template

from runs.models import Run

register = template.Library()


@register.inclusion_tag("runs/rescore/_run_rescore.html", takes_context=True)
def scoring_passes(context: template.Context, run: Run) -> dict[str, Any]:
    from runs.rescore.views import scoring_context

    return {
        **scoring_context(run, context.get("overview")),
        "csrf_token": context.get("csrf_token"),
    }

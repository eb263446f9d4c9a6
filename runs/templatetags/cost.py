"""Costs as people read them: dollars, or why there is no figure."""

from __future__ import annotations

from typing import Any

from django import template

from runs.calls.pricing import configured_model
from runs.calls.pricing import usd as format_usd
from runs.models import Result, Run

register = template.Library()

DASH = "\u2013"


@register.filter
def usd(value: float | None) -> str:
    """4.2 -> "$4.20"; a dash for no figure."""
    return DASH if value is None else format_usd(value)


def _model_phrase(models: list[str]) -> str:
    named = [m for m in models if m]
    if not named:
        return "no price for the model"
    listed = ", ".join(named)
    return f"no price for model{'s' if len(named) > 1 else ''} {listed}"


@register.simple_tag
def run_budget(run: Run) -> float | None:
    """The run's cost budget; None without one (older runs have no such option)."""
    return run.options.get("cost_budget")


@register.simple_tag
def run_cost_note(run: Run, models: list[str] | None = None) -> str:
    """Why the run's cost is incomplete: "no price for model X", or ""."""
    if not run.unpriced:
        return ""
    if models is None:
        model = configured_model(run.target_config)
        models = [model] if model else []
    return _model_phrase(models)


@register.simple_tag
def result_cost_note(result: Result) -> str:
    """Why a result has no cost."""
    if result.cost is not None:
        return ""
    if result.prompt_tokens is None and result.completion_tokens is None:
        return "not reported"
    return _model_phrase([result.model])


@register.filter
def attempt_cost(attempt: dict[str, Any]) -> str:
    """An attempt's cost, or why it has none."""
    if attempt.get("cost") is not None:
        return format_usd(attempt["cost"])
    if "prompt_tokens" in attempt or "completion_tokens" in attempt:
        return _model_phrase([attempt.get("model") or ""])
    return DASH

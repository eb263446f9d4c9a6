"""Figures of the run summary as people read them."""

from __future__ import annotations

from django import template

register = template.Library()

DASH = "\u2013"  # en dash: no figure, and between an interval's ends


@register.filter
def percent(value: float | None, digits: int = 1) -> str:
    """0.5884 -> "58.8%"; a dash for no figure."""
    if value is None:
        return DASH
    return f"{100 * value:.{digits}f}%"


@register.filter
def percent_interval(interval: tuple[float, float] | None) -> str:
    """(0.560, 0.616) -> "[56.0-61.6]" (an en dash); empty for no interval."""
    if interval is None:
        return ""
    low, high = interval
    return f"[{100 * low:.1f}{DASH}{100 * high:.1f}]"


@register.filter
def milliseconds(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:,.0f} ms" if value >= 100 else f"{value:,.1f} ms"

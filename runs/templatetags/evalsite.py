"""Small display filters for the dashboard templates."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from django import template
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.formats import localize
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe
from django.utils.timezone import template_localtime  # type: ignore[attr-defined]  # not in django-stubs

from runs.models import call_status_label
from runs.templatetags.run_summary import percent

if TYPE_CHECKING:
    from runs.records.reads import PassRates, RunRow

register = template.Library()

STATUS_CLASSES = {
    "pending": "neutral",
    "running": "info",
    "completed": "ok",
    "completed_with_errors": "warn",
    "failed": "bad",
    "cancelled": "muted",
    # A call that answered, right or wrong: its score says which, not green.
    "succeeded": "neutral",
    "timed_out": "warn",
    "ok": "ok",
    "error": "bad",
    "timeout": "warn",
}


def class_filter(
    name: str, classes: dict[str, str], default: str
) -> Callable[[str], str]:
    """Register the filter ``name``: a value's CSS class in ``classes``, else
    ``default``."""

    def css_class(value: str) -> str:
        return classes.get(value, default)

    register.filter(name, css_class)
    return css_class


status_class = class_filter("status_class", STATUS_CLASSES, "neutral")


register.filter("call_status", call_status_label)


# reST's inline literal, as the plug-ins' docstrings and help write it; not
# a Markdown fence (```json), whose third backtick is not part of it.
INLINE_LITERAL = re.compile(r"(?<!`)``([^`]+?)``(?!`)")


@register.filter(is_safe=True)
def literals(value: Any) -> str:
    """Text with its ``code`` shown as <code>code</code>, everything escaped."""
    # Safe: the text is escaped before the tags are put in.
    return mark_safe(INLINE_LITERAL.sub(r"<code>\1</code>", conditional_escape(value)))


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


def _one_line(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.split())


@register.filter
def tail(value: Any, limit: int = 80) -> str:
    """The end of a value on one line: "…" and its last ``limit`` characters
    (where a model puts its final answer)."""
    if value is None:
        return ""
    if isinstance(value, str) and len(value) > 4 * limit:
        # Only the end is shown: its whitespace alone is folded.
        value = value[-4 * limit :]
        text = _one_line(value)
        return "…" + text[-(limit - 1) :]
    text = _one_line(value)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


@register.filter
def ends(value: Any, limit: int = 1000) -> str:
    """A value on one line, whole up to ``2 * limit`` characters; longer, its
    first and last ``limit`` characters around " … " (a cell's title)."""
    if value is None:
        return ""
    if isinstance(value, str) and len(value) > 8 * limit:
        value = value[: 4 * limit] + " " + value[-4 * limit :]
    text = _one_line(value)
    if len(text) <= 2 * limit:
        return text
    return f"{text[:limit]} … {text[-limit:]}"


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


# -- the runs table, rendered in Python ----------------------------------------
# The dashboard's runs page shows up to 50 rows of ten cells. Through the
# template language each row cost about 0.5 ms (some twenty variable lookups,
# two URL reversals, an include and three date formats), most of the page's
# time. Here each row is one str.format with every text value escaped
# (html.escape, as django.utils.html.escape does) and numbers as they are: the
# same markup for a small part of that.

_PK_MARK = 918273645  # reversed once per table, then replaced by each id

_RUN_ROW = (
    '<tr>\n      <td class="pick"><input type="checkbox" name="run" value="{pk}"'
    ' form="compare-form" aria-label="Compare run #{pk}"></td>'
    '\n      <td><a href="{run_url}">{run}</a> <span class="muted">#{pk}</span>'
    "</td>"
    "\n      <td>{project}</td>"
    '\n      <td><a href="{dataset_url}">{dataset} v{version}</a></td>'
    '\n      <td>{target_name} <span class="muted">{target_kind}</span></td>'
    '\n      <td><span class="badge {status_class}">{status_label}</span>{stale}'
    "{redrawn}</td>"
    '\n      <td class="pass-rates">{pass_rates}</td>'
    '\n      <td class="num">{processed}/{total}</td>'
    '\n      <td class="num">{succeeded}</td>'
    '\n      <td class="num">{failed}</td>'
    '\n      <td class="num">{timed_out}</td>'
    '\n      <td><time datetime="{created_iso}" title="{created}">{created_ago}</time>'
    "</td>\n    </tr>\n"
)
_REDRAWN = (
    ' <span class="badge warn redrawn" title="Stored results that retries'
    ' replaced in place with a new outcome">{} result{} re-drawn by retry</span>'
)
_STALE = (
    ' <span class="stale" title="No heartbeat from an executor for a while: it will'
    ' be resumed">no heartbeat</span>'
)


def _redrawn(replaced: int) -> str:
    if not replaced:
        return ""
    return _REDRAWN.format(replaced, "" if replaced == 1 else "s")


_PASS_RATE = '<span class="pass-rate"><code>{}</code> {}</span>'
_NO_PASS_RATE = (
    '<span class="muted" title="Shown once the run has ended and its figures are'
    ' computed: open the run">\u2013</span>'
)


def _pass_rates(rates: PassRates | None) -> str:
    """Each scorer's pass rate, the run's headline figure, one per line."""
    if not rates:
        return _NO_PASS_RATE
    return "<br>".join(
        _PASS_RATE.format(html.escape(scorer), percent(rate)) for scorer, rate in rates
    )


def _url_format(name: str) -> str:
    """The URL of ``name`` for one id, as a format string with ``{}`` for the id."""
    return html.escape(reverse(name, args=[_PK_MARK])).replace(str(_PK_MARK), "{}")


@register.simple_tag
def run_rows(
    runs: Iterable[RunRow], pass_rates: Mapping[int, PassRates] | None = None
) -> str:
    """The rows of the runs table (runs/records/reads.py RunTable), with the
    ended runs' pass rates (``reads.run_pass_rates``)."""
    pass_rates = pass_rates or {}
    escape = html.escape
    run_url = _url_format("runs:run_detail")
    dataset_url = _url_format("runs:dataset_detail")
    rows = []
    for run in runs:
        created = template_localtime(run.created_at)
        rows.append(
            _RUN_ROW.format(
                run_url=run_url.format(run.pk),
                run=escape(str(run)),
                pk=run.pk,
                project=escape(run.project_name),
                dataset_url=dataset_url.format(run.dataset_id),
                dataset=escape(run.dataset_name),
                version=run.dataset_version,
                target_name=escape(run.target_name),
                target_kind=escape(run.target_kind),
                status_class=status_class(run.status),
                status_label=escape(run.status_label),
                stale=_STALE if run.stale else "",
                redrawn=_redrawn(run.retry_replaced),
                pass_rates=_pass_rates(pass_rates.get(run.pk)),
                processed=run.processed,
                total=run.total,
                succeeded=run.succeeded,
                failed=run.failed,
                timed_out=run.timed_out,
                created_iso=created.isoformat(),  # the date filter's "c"
                created=escape(localize(created)),
                created_ago=escape(run.created_ago),
            )
        )
    return mark_safe("    ".join(rows))


# -- comparisons -----------------------------------------------------------------

VERDICT_CLASSES = {
    "better": "verdict-better",
    "worse": "verdict-worse",
    "no_significant_difference": "verdict-none",
}

verdict_class = class_filter("verdict_class", VERDICT_CLASSES, "verdict-none")


@register.filter
def pvalue(value: float | None) -> str:
    """A p-value to three significant digits; tiny ones as ``< 0.0001``."""
    if value is None:
        return "\u2013"
    if value < 0.0001:
        return "< 0.0001"
    return f"{value:.3g}" if value < 0.001 else f"{value:.4f}".rstrip("0").rstrip(".")


@register.filter
def signed(value: float | None, digits: int = 3) -> str:
    """A difference with its sign: ``+0.045``, ``-0.012``."""
    if value is None:
        return "\u2013"
    return f"{value:+.{int(digits)}f}".replace("-", "\u2212")

"""The rows of a run's results table, rendered in Python.

A run's page shows 50 results of nine cells, each with its scores: through
the template language (an include per row and per status badge, some forty
variable lookups and thirty conditions a row) the table was most of a first
view's time. Here each row is one ``str.format`` with every text value
escaped as the template escaped it (``conditional_escape`` of the localized
value) and the same filters called: the same markup for a part of the time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.template.defaultfilters import floatformat, truncatechars
from django.urls import reverse
from django.utils.formats import localize
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from runs.models import Result, Score, call_status_label
from runs.templatetags.evalsite import compact, ends, status_class, tail

register = template.Library()

_PK_MARK = 918273645  # reversed once per table, then replaced by each id

_ROW = (
    '<tr data-result-id="{pk}">\n'
    '  <td class="num"><a href="{url}{query}">{index}</a></td>\n'
    "  <td><code>{external_id}</code>{epoch}</td>\n"
    '  <td class="cell-text result-input" title="{input_title}">{input}</td>\n'
    '  <td class="cell-text result-expected" title="{expected_title}">{expected}'
    "</td>\n"
    '  <td><span class="badge {status_class}">{status_label}</span>\n</td>\n'
    '  <td class="cell-text result-output" title="{output_title}">{output}</td>\n'
    '  <td class="cell-text">{scores}</td>\n'
    '  <td class="num">{latency}</td>\n'
    '  <td class="num">{attempts}</td>\n'
    "</tr>\n"
)
_EPOCH = ' <span class="muted">e{}</span>'
_NO_EXPECTED = '<span class="muted">\u2013</span>'
_TRUNCATED = '<span class="badge warn" title="Cut at max_tokens">truncated</span> '
_ERROR = '<span class="{}">{}{}</span>'
_SCORE = '<span class="score{}" title="{}">{} {}{}</span>'


def _text(value: Any) -> SafeString | str:
    """A value as ``{{ value }}`` shows it: localized, then escaped."""
    return conditional_escape(localize(value))


def _output(result: Result) -> str:
    if result.status == "succeeded":
        attempts = result.attempts
        last = attempts[-1] if attempts else None
        cut = isinstance(last, dict) and last.get("finish_reason") == "length"
        return (_TRUNCATED if cut else "") + _text(tail(result.output, 80))
    css = "muted" if result.status == "cancelled" else "error-text"
    message = result.error_message
    detail = f": {_text(truncatechars(message, 60))}" if message else ""
    return _ERROR.format(css, _text(result.error_type), detail)


def _score(score: Score) -> str:
    if score.error:
        css, verdict = " bad", "error"
    elif score.skipped:
        css, verdict = " skipped", "skipped"
    elif score.passed:
        css, verdict = " ok", "passed"
    elif score.passed is False:
        css, verdict = " fail", "failed"
    else:
        css, verdict = "", ""
    value = score.value
    shown = value is not None and (value not in (0, 1) or score.passed is None)
    number = f" {floatformat(value, '-2')}" if shown else ""
    title = _text(score.reason or score.error)
    return _SCORE.format(css, title, _text(score.scorer), verdict, number)


def _row(result: Result, url: str, query: str, show_epoch: bool) -> str:
    item = result.item
    latency = result.latency_ms
    return _ROW.format(
        pk=_text(result.pk),
        url=url.format(result.run_id, result.pk),
        query=query,
        index=_text(result.item_index),
        external_id=_text(item.external_id),
        epoch=_EPOCH.format(_text(result.epoch)) if show_epoch else "",
        input_title=_text(ends(item.input)),
        input=_text(compact(item.input, 80)),
        expected_title=_text(ends(item.expected)),
        expected=_NO_EXPECTED
        if item.expected is None
        else _text(compact(item.expected, 40)),
        status_class=status_class(result.status),
        status_label=_text(call_status_label(result.status) or result.status),
        output_title=_text(ends(result.output)),
        output=_output(result),
        scores="".join(map(_score, result.scores.all())),
        latency=f"{floatformat(latency, 0)} ms" if latency is not None else "\u2013",
        attempts=_text(result.attempt_count),
    )


@register.simple_tag(takes_context=True)
def result_rows(context: template.Context, results: Iterable[Result]) -> str:
    """The rows of ``results`` (their items and scores read with them), links
    keeping the page's ``filters``, epochs shown when ``show_epoch``."""
    # Reversed once, then each row's ids formatted in.
    reversed_url = str(
        conditional_escape(reverse("runs:result_detail", args=[_PK_MARK, _PK_MARK + 1]))
    )
    url = reversed_url.replace(str(_PK_MARK + 1), "{1}").replace(str(_PK_MARK), "{0}")
    query = _text(getattr(context.get("filters"), "query_string", ""))
    show_epoch = bool(context.get("show_epoch"))
    return mark_safe(
        "".join(_row(result, url, query, show_epoch) for result in results)
    )

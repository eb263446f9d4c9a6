"""Rows of the results table and the comparison's items, rendered in Python.

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


def _result_url() -> str:
    """A result's URL as a format string of its run's id and its own."""
    # Reversed once a table, then each row's ids formatted in.
    url = str(
        conditional_escape(reverse("runs:result_detail", args=[_PK_MARK, _PK_MARK + 1]))
    )
    return url.replace(str(_PK_MARK + 1), "{1}").replace(str(_PK_MARK), "{0}")


@register.simple_tag(takes_context=True)
def result_rows(context: template.Context, results: Iterable[Result]) -> str:
    """The rows of ``results`` (their items and scores read with them), links
    keeping the page's ``filters``, epochs shown when ``show_epoch``."""
    url = _result_url()
    query = _text(getattr(context.get("filters"), "query_string", ""))
    show_epoch = bool(context.get("show_epoch"))
    return mark_safe(
        "".join(_row(result, url, query, show_epoch) for result in results)
    )


# -- the comparison's item table ----------------------------------------------------
# The comparison page lists 50 items of two runs, eight cells each with three
# links: rendered in Python as the results table is.

_ITEM_ROW = (
    '\n        <tr class="change-{change}">'
    "\n          <td><code>{external_id}</code>"
    ' <a class="small trajectory-diff-link" href="{diff_url}?item={item}'
    '&amp;runs={baseline},{candidate}" title="The two runs\' trajectories of'
    ' this item, side by side">steps</a></td>'
    '\n          <td class="cell-text item-input" title="{input_title}">{input}</td>'
    '\n          <td class="cell-text item-expected" title="{expected_title}">'
    "{expected}</td>"
    '\n          <td class="cell-text"><a href="{baseline_url}"'
    ' title="{baseline_title}">{baseline_output}</a></td>'
    '\n          <td class="cell-text"><a href="{candidate_url}"'
    ' title="{candidate_title}">{candidate_output}</a></td>'
    '\n          <td class="num">{baseline_score}{baseline_epochs}</td>'
    '\n          <td class="num">{candidate_score}{candidate_epochs}</td>'
    '\n          <td><span class="change {change}">{change_label}</span></td>'
    "\n        </tr>\n        "
)
_EPOCHS = ' <span class="muted">({} epochs)</span>'
_CHANGE_LABELS = {
    "both_passed": "both passed",
    "both_failed": "both failed",
    "regressions": "regression",
}


def _epochs(value: Any) -> str:
    try:
        return _EPOCHS.format(_text(value)) if value > 1 else ""
    except TypeError:  # as the template's comparison of a missing value
        return ""


def _output_cell(output: Any, title: str) -> tuple[str, str]:
    """A cell's title and text: the output's ends and its end, else defaults."""
    return _text(ends(output) or title), _text(tail(output, 120) or "(no output)")


def _item_row(row: dict[str, Any], urls: tuple[str, str], pks: tuple[str, str]) -> str:
    diff_url, result_url = urls
    expected = row.get("expected")
    baseline_title, baseline_output = _output_cell(
        row.get("baseline_output"), "Baseline result"
    )
    candidate_title, candidate_output = _output_cell(
        row.get("candidate_output"), "Candidate result"
    )
    change = row.get("change")
    return _ITEM_ROW.format(
        change=_text(change),
        external_id=_text(row.get("external_id")),
        diff_url=diff_url,
        item=_text(row.get("baseline_item")),
        baseline=pks[0],
        candidate=pks[1],
        input_title=_text(ends(row.get("input"))),
        input=_text(compact(row.get("input"), 120)),
        expected_title=_text(ends(expected)),
        expected=_NO_EXPECTED if expected is None else _text(compact(expected, 40)),
        baseline_url=result_url.format(
            row.get("baseline_run"), row.get("baseline_result")
        ),
        baseline_title=baseline_title,
        baseline_output=baseline_output,
        candidate_url=result_url.format(
            row.get("candidate_run"), row.get("candidate_result")
        ),
        candidate_title=candidate_title,
        candidate_output=candidate_output,
        baseline_score=floatformat(row.get("baseline_score"), "-2"),
        baseline_epochs=_epochs(row.get("baseline_epochs")),
        candidate_score=floatformat(row.get("candidate_score"), "-2"),
        candidate_epochs=_epochs(row.get("candidate_epochs")),
        change_label=_CHANGE_LABELS.get(str(change), "improvement"),
    )


@register.simple_tag(takes_context=True)
def comparison_rows(context: template.Context, rows: Iterable[dict[str, Any]]) -> str:
    """The rows of the comparison's item table (``ComparisonItems``), each
    as the loop of compare.html wrote it, between the page's ``baseline``
    and ``candidate``."""
    urls = (
        str(conditional_escape(reverse("runs:trajectory_diff"))),
        _result_url(),
    )
    pks = (
        str(_text(getattr(context.get("baseline"), "pk", ""))),
        str(_text(getattr(context.get("candidate"), "pk", ""))),
    )
    return mark_safe("".join(_item_row(row, urls, pks) for row in rows))

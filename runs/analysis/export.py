"""A run's results as CSV or JSON Lines, streamed row by row.

Rows are read in dataset order from a database cursor, a chunk at a time, and
each chunk's scores are fetched with one query: however many results a run
has, the export holds one chunk in memory. CSV cells are neutralised against
formula injection (a spreadsheet would run a cell such as ``=HYPERLINK(...)``).

Each scorer has the columns ``<scorer>.value``, ``.passed``, ``.error`` and
``.reason`` (what the scorer said of its verdict: a judge's explanation);
a scorer whose scores carry a model's usage (a judge) also has
``.prompt_tokens``, ``.completion_tokens`` and ``.cost``. The columns depend
on the run's scorers only, never on its scores. A score skipped by its
condition is neither passed nor failed: in JSON Lines its ``passed`` is null
and ``<scorer>.skipped`` is true (false for every other score); in CSV its
passed cell reads ``skipped``, beside ``true``, ``false`` and empty (no score:
the target call failed). The run's own columns (``RUN_COLUMNS``) come after
the result's, before the scorers'. A result's trajectory gives
``step_count`` and ``tool_call_count`` (``STEP_COLUMNS``), and in JSON Lines
``steps``: its steps in order, each as stored (payloads bounded, their full
sizes in ``arguments_bytes`` and ``output_bytes``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import batched
from typing import Any

from django.db.models import Count
from django.utils.text import slugify

from runs.models import ATTEMPTS_MADE, RESULT_OUTCOME, Result, Run, Score, Step
from runs.plugins.scorers import SCORERS
from runs.records.json_texts import JsonText
from runs.records.step_rows import STEP_DATA_FIELDS

CHUNK_SIZE = 1000

# A spreadsheet reads a cell that starts with one of these as a formula (or,
# for tab and carriage return, strips it and reads what follows).
FORMULA_STARTS = frozenset("=+-@\t\r")
# A plain decimal number, such as -3.5, +2 or 1e5: a spreadsheet reads it as a
# number, never as a formula, so it is left as it is.
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

ITEM_COLUMNS = ("item_index", "external_id", "input", "expected", "metadata")
RESULT_COLUMNS = (
    "epoch",
    *RESULT_OUTCOME,
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "attempts",
)
EXPORT_FIELDS = (*ITEM_COLUMNS, *RESULT_COLUMNS)
# Where a column's value is read from, when not from the result's field of its name.
QUERY_FIELDS = {
    **{column: f"item__{column}" for column in ITEM_COLUMNS[1:]},
    "attempts": "attempt_total",
}
SCORE_FIELDS = ("value", "passed", "error", "reason")
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cost")
SKIPPED = "skipped"  # a skipped score's passed cell in CSV
# The run's own figures that qualify every row, in each row (neither format
# holds a header of metadata): how many results retries replaced in place,
# and of them how many had an answer (Run.retry_replaced).
RUN_COLUMNS = ("run_retry_replaced", "run_retry_replaced_answers")
# A result's trajectory: its number of steps and of tool calls in both
# formats, and in JSON Lines the steps themselves (``steps``, in order).
STEP_COLUMNS = ("step_count", "tool_call_count")
STEP_EXPORT_FIELDS = STEP_DATA_FIELDS


@dataclass(frozen=True, slots=True)
class ExportFormat:
    content_type: str
    extension: str


EXPORT_FORMATS = {
    "jsonl": ExportFormat("application/x-ndjson; charset=utf-8", "jsonl"),
    "csv": ExportFormat("text/csv; charset=utf-8", "csv"),
}


# json.dumps with any argument of its own makes an encoder per call: made
# once, for the JSON cells and lines of every row of an export.
_JSON_CELL = JsonText(ensure_ascii=False, sort_keys=True)
_JSON_LINE = JsonText(ensure_ascii=False, default=str)


def _text(value: object) -> str:
    """A value as a spreadsheet cell's text: strings as they are, JSON otherwise."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return _JSON_CELL(value)


def safe_cell(value: object) -> str:
    """``value`` as CSV cell text that no spreadsheet reads as a formula.

    Text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
    gets a leading ``'``; numbers (``-3.5``, ``1e5``) stay numbers.
    """
    # Called for every cell of an export: the common types first.
    kind = type(value)
    if kind is str:
        # Narrowed by the test above; typing.cast would be a call per cell.
        text: str = value  # type: ignore[assignment]
    elif kind is float or kind is int:
        return repr(value)
    else:
        text = _text(value)
    if text and text[0] in FORMULA_STARTS and NUMBER.fullmatch(text) is None:
        return "'" + text
    return text


# Cell types the CSV writer writes as safe_cell does (repr), bool not among them.
_AS_THEY_ARE = frozenset({int, float})


class _Line:
    """A file-like object for ``csv.writer`` that hands back what is written."""

    def write(self, text: str) -> str:
        return text


def stream_csv(
    header: Sequence[str], rows: Iterable[Sequence[object]]
) -> Iterator[str]:
    """The header, then one CSV line per row, every cell through ``safe_cell``."""
    writer = csv.writer(_Line())
    yield writer.writerow([safe_cell(name) for name in header])
    for row in rows:
        # Numbers and None go to the writer as they are: it writes what
        # safe_cell would (repr, an empty cell) without a call per cell.
        yield writer.writerow(
            [
                value
                if value is None or type(value) in _AS_THEY_ARE
                else safe_cell(value)
                for value in row
            ]
        )


def stream_jsonl(rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """One JSON object per line."""
    for row in rows:
        yield _JSON_LINE(row) + "\n"


def _scorer_fields(run: Run, *, skipped: bool) -> list[tuple[str, tuple[str, ...]]]:
    """Each scorer's name and its fields, in the run's order."""
    fields = []
    for spec in run.scorers:
        name = spec.get("name") or spec.get("kind")
        plugin = SCORERS.get(spec.get("kind", ""))
        usage = USAGE_FIELDS if getattr(plugin, "reports_usage", False) else ()
        flag = ("skipped",) if skipped else ()
        fields.append((name, (*SCORE_FIELDS, *flag, *usage)))
    # People's scorers (review queues' consensus) after the run's own.
    flag = ("skipped",) if skipped else ()
    listed = {name for name, _ in fields}
    for name in run.human_scorers:
        if name not in listed:
            fields.append((name, (*SCORE_FIELDS, *flag)))
    return fields


def export_columns(*, run: Run, format: str = "jsonl") -> list[str]:
    """The keys of each row of ``run_export_rows`` (JSON Lines), or the CSV
    header (without ``.skipped``: the passed cell says so), in order."""
    scores = [
        f"{name}.{field}"
        for name, fields in _scorer_fields(run, skipped=format != "csv")
        for field in fields
    ]
    steps = ("steps",) if format != "csv" else ()
    return [*EXPORT_FIELDS, *STEP_COLUMNS, *steps, *RUN_COLUMNS, *scores]


def _run_cells(run: Run) -> dict[str, int]:
    """The run-level columns of every row (RUN_COLUMNS)."""
    return {
        "run_retry_replaced": run.retry_replaced,
        "run_retry_replaced_answers": run.retry_replaced_answers,
    }


def run_export_rows(
    *, run: Run, chunk_size: int = CHUNK_SIZE, steps: bool = True
) -> Iterator[dict[str, Any]]:
    """Every result of the run with its item and its scores, in dataset order.

    One flat dict per result, keyed by ``export_columns``; each scorer has a
    value, a passed flag, whether it was skipped and an error (None where it
    has no score), and a judge its tokens and cost; its trajectory's counts,
    and with ``steps`` the steps themselves. Results come from a cursor
    ``chunk_size`` at a time, with one query for the scores of each chunk and
    one for its steps.
    """
    names = run.scorer_names
    # Each scorer's (column, field) pairs, and its columns of a missing score,
    # made once rather than for every row.
    scorers = [
        (
            [(f"{name}.{field}", field) for field in fields],
            {
                **dict.fromkeys(f"{name}.{field}" for field in fields),
                f"{name}.skipped": False,
            },
            f"{name}.error",
            name,
        )
        for name, fields in _scorer_fields(run, skipped=True)
    ]
    # The run's own cells, and a result's without steps, shared by every row
    # (``update`` copies them in).
    run_cells = _run_cells(run)
    if not steps:
        run_cells.update(_no_steps(whole=False))
    has_steps = run.has_steps
    results = (
        Result.objects.filter(run=run)
        .order_by("item_index", "epoch")
        # Not Result.attempt_count's name: that property counts in Python.
        .annotate(attempt_total=ATTEMPTS_MADE)
        .values_list("pk", *(QUERY_FIELDS.get(c, c) for c in EXPORT_FIELDS))
    )
    for chunk in batched(results.iterator(chunk_size=chunk_size), chunk_size):
        scores = _chunk_scores(run=run, names=names, first=chunk[0], last=chunk[-1])
        # A run that never stored a step has none to read.
        trajectories = (
            _chunk_steps(run=run, first=chunk[0], last=chunk[-1], whole=steps)
            if has_steps
            else {}
        )
        for pk, *fields in chunk:
            row = dict(zip(EXPORT_FIELDS, fields, strict=True))
            if steps:
                row.update(trajectories.get(pk) or _no_steps(whole=True))
                row.update(run_cells)
            else:
                # Counts of no steps are in run_cells: a result's own after.
                row.update(run_cells)
                if pk in trajectories:
                    row.update(trajectories[pk])
            for columns, missing, error, name in scorers:
                score = scores.get((pk, name))
                if score is None:
                    row.update(missing)
                    continue
                for column, field in columns:
                    row[column] = score.get(field)
                row[error] = score["error"] or None
            yield row


def _chunk_scores(
    *, run: Run, names: list[str], first: tuple[Any, ...], last: tuple[Any, ...]
) -> dict[tuple[int, str], dict[str, Any]]:
    """(result id, scorer) -> its score's fields for the results of a chunk.

    Read by the chunk's range of item indexes (the index on run, item_index
    serves it) rather than by a list of a thousand ids: the range may hold a
    few results of the neighbouring chunks, whose scores are not looked up.
    """
    scores = (
        Score.objects.filter(
            result__run=run,
            result__item_index__gte=first[1],
            result__item_index__lte=last[1],
            scorer__in=names,
        )
        .order_by()
        .values("result_id", "scorer", *SCORE_FIELDS, "skipped", *USAGE_FIELDS)
    )
    return {(score["result_id"], score["scorer"]): score for score in scores}


def _no_steps(*, whole: bool) -> dict[str, Any]:
    return {"step_count": 0, "tool_call_count": 0, **({"steps": []} if whole else {})}


def _chunk_steps(
    *, run: Run, first: tuple[Any, ...], last: tuple[Any, ...], whole: bool
) -> dict[int, dict[str, Any]]:
    """Result id -> its step and tool call counts (and, ``whole``, its steps
    in order) for the results of a chunk, read by its range of item indexes."""
    steps = Step.objects.filter(
        result__run=run,
        result__item_index__gte=first[1],
        result__item_index__lte=last[1],
    )
    found: dict[int, dict[str, Any]] = {}
    if not whole:
        counts = steps.order_by().values("result_id", "kind").annotate(n=Count("id"))
        for count in counts:
            row = found.setdefault(count["result_id"], _no_steps(whole=False))
            row["step_count"] += count["n"]
            if count["kind"] == Step.Kind.TOOL:
                row["tool_call_count"] += count["n"]
        return found
    for step in steps.order_by("result_id", "index").values(
        "result_id", *STEP_EXPORT_FIELDS
    ):
        row = found.setdefault(step.pop("result_id"), _no_steps(whole=True))
        row["steps"].append(step)
        row["step_count"] += 1
        row["tool_call_count"] += step["kind"] == Step.Kind.TOOL
    return found


def run_export_lines(*, run: Run, format: str) -> Iterator[str]:
    """The whole export of a run in ``format`` (a key of ``EXPORT_FORMATS``)."""
    rows = run_export_rows(run=run, steps=format != "csv")
    if format == "csv":
        columns = export_columns(run=run, format="csv")
        names = run.scorer_names
        return stream_csv(columns, (_csv_cells(row, columns, names) for row in rows))
    return stream_jsonl(rows)


def _csv_cells(row: dict[str, Any], columns: list[str], names: list[str]) -> list[Any]:
    """A row's cells under the CSV header: a skipped score's passed reads
    ``skipped``."""
    for name in names:
        if row[f"{name}.skipped"]:
            row[f"{name}.passed"] = SKIPPED
    return [row[column] for column in columns]


def run_export_filename(*, run: Run, format: str) -> str:
    """``run-12-my-run.csv``: the run's id and name, for a download."""
    slug = slugify(run.name)[:60]
    stem = f"run-{run.pk}-{slug}" if slug else f"run-{run.pk}"
    return f"{stem}.{EXPORT_FORMATS[format].extension}"

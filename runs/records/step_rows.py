"""The one writer of ``Step`` rows: a result's trajectory, stored with it.

Called by ``rows.results_store`` in the transaction of the results and their
counts: a result is never stored without its steps, nor its steps without
it. A result replaced by a retry has its steps replaced with it. Payloads are
bounded here (``runs.plugins.steps.bounded``: cut, their full size kept), a
tool call gets its stable hash, and the rows go in as plain tuples
(``plain_rows``), like the results'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from runs.models import Step
from runs.plugins.steps import Step as StepRecord
from runs.plugins.steps import bounded_json, call_hash
from runs.records.plain_rows import insert, table

# A step's error is kept up to this many characters.
ERROR_CHARS = 4000
# A step's own columns, in the order of ``step_row`` after its result's id
# (the export writes them in this order too).
STEP_DATA_FIELDS = (
    "index",
    "kind",
    "name",
    "call_hash",
    "call_id",
    "arguments",
    "output",
    "arguments_bytes",
    "output_bytes",
    "error",
    "error_type",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "model",
)
STEP_FIELDS = ("result_id", *STEP_DATA_FIELDS)


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def step_row(result_id: int, index: int, step: StepRecord) -> tuple[Any, ...]:
    """A ``Step`` row in ``STEP_FIELDS`` order (then the defaults)."""
    arguments, arguments_bytes = bounded_json(step.arguments)
    output, output_bytes = bounded_json(step.output)
    tool = step.kind == "tool"
    cost = step.cost if isinstance(step.cost, int | float) else None
    return (
        result_id,
        index,
        step.kind,
        str(step.name)[:200],
        call_hash(step.name, step.arguments) if tool else "",
        str(step.call_id or "")[:200],
        arguments,
        output,
        arguments_bytes,
        output_bytes,
        str(step.error or "")[:ERROR_CHARS],
        str(step.error_type or "")[:200],
        step.latency_ms,
        _count(step.prompt_tokens),
        _count(step.completion_tokens),
        cost,
        "" if tool else str(step.name)[:200],
    )


def step_rows(
    pairs: Iterable[tuple[int, Sequence[StepRecord] | None]],
) -> list[tuple[Any, ...]]:
    """Rows of ``Step`` for (result id, steps) pairs, numbered from 0."""
    defaults = table(Step, STEP_FIELDS).defaults
    return [
        (*step_row(result_id, index, step), *defaults)
        for result_id, steps in pairs
        for index, step in enumerate(steps or ())
    ]


def steps_insert(pairs: Iterable[tuple[int, Sequence[StepRecord] | None]]) -> int:
    """Insert the steps of (result id, steps) pairs; how many rows."""
    rows = step_rows(pairs)
    if rows:
        insert(table(Step, STEP_FIELDS), rows)
    return len(rows)


def steps_delete(result_ids: Sequence[int]) -> None:
    """Delete the steps of these results (a retry replaces them)."""
    if result_ids:
        Step.objects.filter(result_id__in=result_ids).delete()

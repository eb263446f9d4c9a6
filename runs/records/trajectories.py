"""Stored trajectories read back as a target reported them (``runs.plugins.steps``)."""

from __future__ import annotations

from runs.models import Step as StepRow
from runs.plugins.steps import Step

STEP_FIELDS = (
    "kind", "name", "arguments", "output", "error", "error_type",
    "latency_ms", "prompt_tokens", "completion_tokens", "cost", "call_id",
)  # fmt: skip


def stored_steps(result_ids: list[int]) -> dict[int, list[Step]]:
    """The trajectories of these results, in order, by result (a result
    without steps is absent). A payload cut when stored stays cut: the start
    of its JSON text."""
    found: dict[int, list[Step]] = {}
    rows = (
        StepRow.objects.filter(result_id__in=result_ids)
        .order_by("result_id", "index")
        .values_list("result_id", *STEP_FIELDS)
    )
    for result_id, *values in rows:
        step = Step(**dict(zip(STEP_FIELDS, values, strict=True)))
        found.setdefault(result_id, []).append(step)
    return found

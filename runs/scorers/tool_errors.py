"""How many of the trajectory's tool calls ended in an error."""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from pydantic import Field

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, register
from runs.plugins.steps import Step
from runs.scorers.trajectory import ToolCall, ToolCallScorer


class ToolErrorsParams(Params):
    max_errors: int = Field(
        0, ge=0, le=10_000_000, description="Most failed tool calls allowed."
    )
    max_rate: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Highest share of failed tool calls allowed (as well).",
    )


@register
class ToolErrors(ToolCallScorer[ToolErrorsParams]):
    """Passes when at most ``max_errors`` tool calls failed (and, with
    ``max_rate``, at most that share of them).

    A tool call failed when its step has an error (the tool raised, timed
    out, answered an error, or the model's arguments were not JSON). The
    value is the share of tool calls that succeeded (1 with no tool call);
    the reason counts the failures per tool.
    """

    kind: ClassVar[str] = "tool_errors"
    label: ClassVar[str] = "Tool errors"
    example: ClassVar[dict[str, Any]] = {"max_errors": 0}

    def score_trajectory(
        self, calls: list[ToolCall], steps: list[Step]
    ) -> ScoreOutcome:
        failed = [call for call in calls if call.failed]
        rate = len(failed) / len(calls) if calls else 0.0
        passed = len(failed) <= self.params.max_errors
        if self.params.max_rate is not None:
            passed = passed and rate <= self.params.max_rate
        per_tool = Counter(call.name for call in failed)
        listed = ", ".join(f"{name} {n}" for name, n in per_tool.most_common(20))
        reason = f"{len(failed)} of {len(calls)} tool calls failed"
        if listed:
            first = failed[0]
            reason += f" ({listed}); first at step {first.position}: "
            reason += (first.error or first.step.error_type)[:200]
        return ScoreOutcome(1.0 - rate, passed, reason)

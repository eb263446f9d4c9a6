"""Whether the trajectory stayed within a number of steps."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, register
from runs.plugins.steps import Step
from runs.plugins.targets import TargetInput


class MaxStepsParams(Params):
    max_steps: int = Field(
        ge=0, le=10_000_000, description="Most steps allowed (passes at or below)."
    )
    count: Literal["all", "tool", "model"] = Field(
        "all",
        description="Which steps count: all of them, tool calls, or model calls.",
    )


@register
class MaxSteps(ScorerPlugin[MaxStepsParams]):
    """Passes when the trajectory took at most ``max_steps`` steps.

    ``count`` says which steps count: every step (``all``), tool calls only
    (``tool``) or model calls only (``model``). The value is 1 or 0; the
    reason gives the counts of each kind.
    """

    kind: ClassVar[str] = "max_steps"
    label: ClassVar[str] = "At most N steps"
    example: ClassVar[dict[str, Any]] = {"max_steps": 20, "count": "all"}
    needs_expected: ClassVar[bool] = False
    needs_steps: ClassVar[bool] = True

    def score(
        self, *, output: Any, item: TargetInput, steps: list[Step]
    ) -> ScoreOutcome:
        tools = sum(step.kind == "tool" for step in steps)
        models = len(steps) - tools
        which = self.params.count
        counted = {"all": len(steps), "tool": tools, "model": models}[which]
        passed = counted <= self.params.max_steps
        noun = {"all": "steps", "tool": "tool calls", "model": "model calls"}[which]
        reason = (
            f"{counted} {noun} ({models} model, {tools} tool); "
            f"at most {self.params.max_steps} allowed"
        )
        return ScoreOutcome(1.0 if passed else 0.0, passed, reason)

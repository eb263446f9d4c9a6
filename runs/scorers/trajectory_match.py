"""How closely the trajectory's tool calls follow an expected sequence."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field

from runs.plugins import Params, UnitThreshold
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, register
from runs.plugins.steps import Step
from runs.plugins.targets import TargetInput
from runs.scorers.item_metadata import (
    MetadataPath,
    given_or_per_item,
    metadata_value,
)
from runs.scorers.trajectory import (
    MAX_EXPECTED_CALLS,
    ExpectedCall,
    ToolCall,
    any_order,
    checked_calls,
    expected_calls,
    in_order,
    is_subset,
    tool_calls,
)

Mode = Literal["exact", "in_order", "subset"]


class TrajectoryMatchParams(Params):
    mode: Mode = Field(
        "in_order",
        description=(
            "exact: the tool calls are the expected ones, in order, and no "
            "others; in_order: the expected calls are made in order, others may "
            "come between; subset: each is made, in any order."
        ),
    )
    expected: Annotated[
        list[str | dict[str, Any]] | None,
        AfterValidator(checked_calls),
        Field(max_length=MAX_EXPECTED_CALLS),
    ] = Field(
        None,
        description=(
            "The expected calls, for every item: names, or "
            '{"tool": ..., "arguments": {...}} (a JSON subset of the arguments). '
            "Without it, each item's expected answer (or expected_field) holds them."
        ),
    )
    expected_field: MetadataPath | None = Field(
        None,
        description=(
            "Dotted path into the item's metadata to its expected calls, instead "
            "of its expected answer."
        ),
    )
    include_failed: bool = Field(
        True, description="Count calls that ended in an error as made."
    )
    threshold: UnitThreshold = Field(
        1.0, description="Passes at or above this score (1: every expected call found)."
    )

    _one_source = given_or_per_item("expected", "expected_field")


def _matches(want: ExpectedCall, call: ToolCall) -> bool:
    if call.name != want.tool:
        return False
    return want.arguments is None or (
        call.parsed and is_subset(want.arguments, call.arguments)
    )


@register
class TrajectoryMatch(ScorerPlugin[TrajectoryMatchParams]):
    """Scores the trajectory's tool calls against an expected sequence, in [0, 1].

    The expected calls come from ``expected`` or, per item, from its expected
    answer (or the metadata field ``expected_field``): a list of tool names
    or ``{"tool", "arguments"}`` objects, or an object with that list under
    ``tool_calls``. A call matches when its tool is the same and its arguments
    hold the expected ones (a JSON subset). ``exact``: the longest common
    subsequence over the longer of the two sequences (1 only for the same
    calls in the same order, nothing more); ``in_order``: the longest common
    subsequence over the expected calls; ``subset``: the expected calls each
    matched by a different call, in any order, over the expected calls.
    Passes at ``threshold`` or above.
    """

    kind: ClassVar[str] = "trajectory_match"
    label: ClassVar[str] = "Trajectory matches expected calls"
    example: ClassVar[dict[str, Any]] = {
        "mode": "in_order",
        "expected": ["search", {"tool": "fetch", "arguments": {"page": 1}}],
    }
    needs_steps: ClassVar[bool] = True

    @classmethod
    def requires_expected(cls, params: dict[str, Any]) -> bool:
        return params.get("expected") is None and not params.get("expected_field")

    def score(
        self, *, output: Any, item: TargetInput, steps: list[Step]
    ) -> ScoreOutcome:
        expected = self.expected_for(item)
        calls = tool_calls(steps)
        if not self.params.include_failed:
            calls = [call for call in calls if not call.failed]
        mode = self.params.mode
        if not expected:
            value = 1.0 if mode != "exact" or not calls else 0.0
            reason = f"no calls expected; {len(calls)} made"
            return ScoreOutcome(value, value >= self.params.threshold, reason)
        if mode == "subset":
            found = sum(j is not None for j in any_order(expected, calls, _matches))
            value = found / len(expected)
        else:
            found = in_order(expected, calls, _matches)
            value = found / max(len(expected), len(calls) if mode == "exact" else 0)
        made = ", ".join(call.name for call in calls[:30])
        more = f" and {len(calls) - 30} more" if len(calls) > 30 else ""
        reason = (
            f"{mode}: {found} of {len(expected)} expected calls matched among "
            f"{len(calls)} made ({made or 'none'}{more}); score {value:.3g}"
        )
        return ScoreOutcome(value, value >= self.params.threshold, reason)

    def expected_for(self, item: TargetInput) -> list[ExpectedCall]:
        if self.params.expected is not None:
            return expected_calls(self.params.expected, source="expected")
        path = self.params.expected_field
        if not path:
            return expected_calls(item.expected, source="the expected answer")
        value = metadata_value(item, path, what="expected calls")
        return expected_calls(value, source=f"metadata.{path}")

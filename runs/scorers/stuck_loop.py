"""Whether the agent got stuck: the same tool call, or cycle of calls, repeated."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, register
from runs.plugins.steps import Step
from runs.scorers.trajectory import ToolCall, ToolCallScorer, describe


class StuckLoopParams(Params):
    repeats: int = Field(
        3,
        ge=2,
        le=10_000,
        description="How many times in a row the same call (or cycle) makes a loop.",
    )
    max_cycle: int = Field(
        3,
        ge=1,
        le=50,
        description=(
            "Longest cycle looked for, in calls: 1 finds only the same call "
            "repeated; 2 also A, B, A, B, ...; and so on."
        ),
    )


def find_loop(
    calls: list[ToolCall], *, repeats: int, max_cycle: int
) -> tuple[int, int] | None:
    """(start, cycle length) of the first stretch where a cycle of at most
    ``max_cycle`` calls comes ``repeats`` times in a row, the shortest cycle
    first; None when there is none.

    Calls are the same when their hashes of tool and arguments are: a cycle
    of length L repeats k times where each of (k - 1) x L calls in a row
    equals the call L before it. Model calls between them do not break a loop.
    """
    keys = [call.key for call in calls]
    for length in range(1, max_cycle + 1):
        needed = (repeats - 1) * length
        run = 0
        for j in range(length, len(keys)):
            run = run + 1 if keys[j] == keys[j - length] else 0
            if run >= needed:
                return j - repeats * length + 1, length
    return None


@register
class StuckLoop(ToolCallScorer[StuckLoopParams]):
    """Fails when the agent repeats itself: the same tool call (same tool, same
    arguments, by a stable hash whatever their key order) ``repeats`` times in
    a row, or a cycle of up to ``max_cycle`` calls (A, B, A, B, ...) as many
    times. Model calls between them do not count. The value is 1 without a
    loop, 0 with one; the reason names where it starts.
    """

    kind: ClassVar[str] = "stuck_loop"
    label: ClassVar[str] = "No stuck loop"
    example: ClassVar[dict[str, Any]] = {"repeats": 3, "max_cycle": 3}

    def score_trajectory(
        self, calls: list[ToolCall], steps: list[Step]
    ) -> ScoreOutcome:
        repeats, max_cycle = self.params.repeats, self.params.max_cycle
        found = find_loop(calls, repeats=repeats, max_cycle=max_cycle)
        if found is None:
            return ScoreOutcome(
                1.0,
                True,
                f"no call or cycle of up to {max_cycle} calls repeated {repeats} "
                f"times in a row among {len(calls)} tool calls",
            )
        start, length = found
        cycle = calls[start : start + length]
        what = (
            f"the same call {describe(cycle[0])}"
            if length == 1
            else f"a cycle of {length} calls ("
            + ", ".join(call.name for call in cycle)
            + f") from step {cycle[0].position}"
        )
        return ScoreOutcome(0.0, False, f"stuck: {what}, {repeats} times in a row")

"""What the trajectory scorers share: tool calls read from steps, expected calls
matched against them, and a trajectory as text for a judge.

A tool call's arguments are read as a target reported them: an object, or a
JSON text (an OpenAI-style ``arguments`` string) parsed here. A payload cut
to its bound is the start of its JSON text, which does not parse: it matches
no argument pattern (the reason says so) but still hashes, so the same cut
call is still the same call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from runs.plugins.params import Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin
from runs.plugins.steps import Step, call_hash
from runs.plugins.targets import TargetInput

# Longest text of one step in a judge's trajectory, and of a quoted value in
# a reason.
STEP_LINE_CHARS = 600
QUOTED_CHARS = 200
# Most expected calls a scorer matches (a pattern each, against every call).
MAX_EXPECTED_CALLS = 200


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool step: where it is in the trajectory, what it called, how it ended."""

    position: int  # the step's index in the trajectory
    name: str
    arguments: Any  # parsed when it was a JSON text
    parsed: bool  # False: a text that is not JSON (cut, or the model's garbage)
    key: str  # call_hash of (name, arguments): the same call, however written
    error: str
    step: Step

    @property
    def failed(self) -> bool:
        return bool(self.error or self.step.error_type)


def parsed_arguments(value: Any) -> tuple[Any, bool]:
    """(arguments, whether they are a JSON value) of a tool step."""
    if isinstance(value, str):
        try:
            return json.loads(value), True
        except ValueError:
            return value, False
    return value, True


def tool_calls(steps: Sequence[Step]) -> list[ToolCall]:
    """The tool steps of a trajectory, in order."""
    calls = []
    for position, step in enumerate(steps):
        if step.kind != "tool":
            continue
        arguments, parsed = parsed_arguments(step.arguments)
        calls.append(
            ToolCall(
                position=position,
                name=step.name,
                arguments=arguments,
                parsed=parsed,
                key=call_hash(step.name, arguments),
                error=step.error,
                step=step,
            )
        )
    return calls


def quoted(value: Any, limit: int = QUOTED_CHARS) -> str:
    """A value as compact JSON for a reason, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else _compact(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=repr)


def describe(call: ToolCall) -> str:
    return f"{call.name}({quoted(call.arguments, 120)}) at step {call.position}"


def is_subset(pattern: Any, value: Any) -> bool:
    """Whether ``value`` holds ``pattern``: an object every key of the pattern
    with a value that holds the pattern's; a list of the same length, item by
    item; anything else equal (true is not 1, 1 is 1.0)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            key in value and is_subset(part, value[key])
            for key, part in pattern.items()
        )
    if isinstance(pattern, list):
        return (
            isinstance(value, list)
            and len(value) == len(pattern)
            and all(is_subset(p, v) for p, v in zip(pattern, value, strict=True))
        )
    if isinstance(pattern, bool) or isinstance(value, bool):
        return type(pattern) is type(value) and pattern == value
    return bool(pattern == value)


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """A tool call a trajectory should hold: its tool, and optionally arguments
    the call's must hold (a JSON subset)."""

    tool: str
    arguments: dict[str, Any] | None = None


def expected_calls(value: Any, *, source: str) -> list[ExpectedCall]:
    """Expected calls as given (a parameter, an item's expected answer or a
    metadata field): a list of tool names or ``{"tool", "arguments"}``
    objects, or an object with such a list under ``tool_calls``; a JSON text
    of either. ValueError naming ``source`` and the entry."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{source} is not a JSON list of tool calls") from None
    if isinstance(value, dict) and "tool_calls" in value:
        value = value["tool_calls"]
    if not isinstance(value, list):
        raise ValueError(
            f"{source} must be a list of tool calls (names or "
            '{"tool": ..., "arguments": {...}})'
        )
    if len(value) > MAX_EXPECTED_CALLS:
        raise ValueError(f"{source} has over {MAX_EXPECTED_CALLS} tool calls")
    return [_expected_call(entry, f"{source}[{n}]") for n, entry in enumerate(value)]


def _expected_call(entry: Any, where: str) -> ExpectedCall:
    if isinstance(entry, str):
        entry = {"tool": entry}
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a tool's name or an object")
    unknown = sorted(set(entry) - {"tool", "arguments"})
    if unknown:
        raise ValueError(f"{where}.{unknown[0]} is not a field (tool, arguments)")
    tool = entry.get("tool")
    if not isinstance(tool, str) or not 1 <= len(tool) <= 200:
        raise ValueError(f"{where}.tool must be a tool's name (1 to 200 characters)")
    arguments = entry.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise ValueError(f"{where}.arguments must be an object")
    return ExpectedCall(tool, arguments)


def checked_calls(value: Any) -> Any:
    """A parameter's list of expected calls, checked (its entries kept as
    given: a parameter holds JSON)."""
    if value is not None:
        expected_calls(value, source="the list")
    return value


Matches = Callable[[ExpectedCall, ToolCall], bool]


def in_order(
    expected: Sequence[Any], calls: Sequence[ToolCall], matches: Matches
) -> int:
    """How many of ``expected`` a subsequence of ``calls`` matches, in order at
    most: the longest common subsequence under ``matches`` (O(n x m))."""
    if not expected or not calls:
        return 0
    previous = [0] * (len(calls) + 1)
    for want in expected:
        current = [0] * (len(calls) + 1)
        for j, call in enumerate(calls, start=1):
            if matches(want, call):
                current[j] = previous[j - 1] + 1
            else:
                current[j] = max(previous[j], current[j - 1])
        previous = current
    return previous[-1]


def any_order(
    expected: Sequence[Any], calls: Sequence[ToolCall], matches: Matches
) -> list[int | None]:
    """For each of ``expected``, the index of a distinct call it matches (None:
    none left): a maximum matching of the bipartite graph (scipy's Hopcroft-
    Karp), so an earlier loose pattern never takes the only call a later one
    could match."""
    if not expected or not calls:
        return [None] * len(expected)
    # On first use: every scorer module is imported when the app starts (the
    # registry), and numpy with scipy.sparse was a third of `evalrun`'s start.
    import numpy as np
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_bipartite_matching

    rows, cols = [], []
    for i, want in enumerate(expected):
        for j, call in enumerate(calls):
            if matches(want, call):
                rows.append(i)
                cols.append(j)
    graph = csr_array(
        (np.ones(len(rows), dtype=np.int8), (rows, cols)),
        shape=(len(expected), len(calls)),
    )
    matched = maximum_bipartite_matching(graph, perm_type="column")
    return [int(j) if j >= 0 else None for j in matched]


def step_line(position: int, step: Step) -> str:
    """One step of a trajectory as a line of text for a judge."""
    if step.kind == "model":
        head = f"[{position}] model {step.name}"
        body = quoted(_reply(step.output), STEP_LINE_CHARS)
    else:
        arguments, _parsed = parsed_arguments(step.arguments)
        head = (
            f"[{position}] tool {step.name}({quoted(arguments, STEP_LINE_CHARS // 2)})"
        )
        body = (
            quoted(step.output, STEP_LINE_CHARS // 2) if step.output is not None else ""
        )
    if step.error:
        return f"{head} -> ERROR {quoted(step.error, STEP_LINE_CHARS // 2)}"
    return f"{head} -> {body}" if body else head


def _reply(output: Any) -> Any:
    """What a model step answered: its text, or the tool calls it asked for."""
    if isinstance(output, dict):
        if output.get("tool_calls"):
            names = [
                (call.get("function") or {}).get("name", "?")
                for call in output["tool_calls"]
                if isinstance(call, dict)
            ]
            return "asks for " + ", ".join(names)
        if "content" in output:
            return output["content"] or ""
    return output if output is not None else ""


def trajectory_text(steps: Sequence[Step], limit: int) -> str:
    """A trajectory as numbered lines, at most ``limit`` characters: its
    beginning and its end when it is longer, with how many steps were left out."""
    if not steps:
        return "(no steps)"
    # Lines are made from both ends only while they fit: a long trajectory
    # costs what is shown, not what it holds.
    head: list[str] = []
    tail: list[str] = []
    budget = limit - 60  # room for the note of what was left out
    start, end = 0, len(steps) - 1
    while start <= end:
        front = len(head) <= len(tail)
        position = start if front else end
        line = step_line(position, steps[position])
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        if front:
            head.append(line)
            start += 1
        else:
            tail.append(line)
            end -= 1
    omitted = end - start + 1
    note = [f"... {omitted} steps left out ..."] if omitted else []
    return "\n".join([*head, *note, *reversed(tail)])


class ToolCallScorer[P: Params](ScorerPlugin[P]):
    """A scorer of a trajectory's tool calls (``tool_calls``), which needs no
    expected answer: it implements ``score_trajectory``."""

    needs_expected: ClassVar[bool] = False
    needs_steps: ClassVar[bool] = True

    def score(
        self, *, output: Any, item: TargetInput, steps: list[Step]
    ) -> ScoreOutcome:
        return self.score_trajectory(tool_calls(steps), steps)

    def score_trajectory(
        self, calls: list[ToolCall], steps: list[Step]
    ) -> ScoreOutcome:
        """The outcome for these tool calls, read from these steps."""
        raise NotImplementedError

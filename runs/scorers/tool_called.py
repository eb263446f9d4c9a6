"""Whether the trajectory called a tool, with the arguments it should have."""

from __future__ import annotations

import json
import warnings
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field, model_validator

from runs.plugins import FieldError, Params
from runs.plugins.scorers import ScoreOutcome, register
from runs.plugins.steps import Step
from runs.scorers.patterns import schema_pattern_problem
from runs.scorers.trajectory import (
    MAX_EXPECTED_CALLS,
    ExpectedCall,
    ToolCall,
    ToolCallScorer,
    any_order,
    checked_calls,
    describe,
    expected_calls,
    in_order,
    is_subset,
    quoted,
)

ExpectedCalls = Annotated[
    list[str | dict[str, Any]],
    AfterValidator(checked_calls),
    Field(min_length=1, max_length=MAX_EXPECTED_CALLS),
]

# The parameter is named as in JSON Schema's vocabulary, like the json scorer's.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", 'Field name "schema"', UserWarning)

    class ToolCalledParams(Params):
        tool: str | None = Field(
            None,
            min_length=1,
            max_length=200,
            description="The tool that must be called (or give calls).",
        )
        arguments: dict[str, Any] | None = Field(
            None,
            description=(
                "With tool: arguments a call must have, as a JSON subset (every "
                "key given, with a value holding the given one; others may be "
                "there too)."
            ),
        )
        arguments_schema: dict[str, Any] | None = Field(
            None,
            description=(
                "With tool: a JSON Schema a call's arguments must satisfy, "
                "validated in one pass (no $ref, uniqueItems or unevaluated*)."
            ),
        )
        min_times: int = Field(
            1, ge=0, le=100_000, description="With tool: fewest matching calls."
        )
        max_times: int | None = Field(
            None, ge=0, le=100_000, description="With tool: most matching calls."
        )
        calls: ExpectedCalls | None = Field(
            None,
            description=(
                "Instead of tool: several calls that must each be made (a name, "
                'or {"tool": ..., "arguments": {...}}), each by a different call.'
            ),
        )
        in_order: bool = Field(
            False, description="With calls: they must be made in the order given."
        )
        include_failed: bool = Field(
            True, description="Count calls that ended in an error as made."
        )

        @model_validator(mode="after")
        def _one_way(self) -> ToolCalledParams:
            if (self.tool is None) == (self.calls is None):
                raise FieldError("tool", "give tool or calls (one of them)")
            if self.calls is not None:
                for name in ("arguments", "arguments_schema", "max_times"):
                    if getattr(self, name) is not None:
                        raise FieldError(name, "goes with tool, not with calls")
            if self.max_times is not None and self.max_times < self.min_times:
                raise FieldError("max_times", "must be at least min_times")
            if self.arguments_schema is not None:
                problem = _schema_problem(self.arguments_schema)
                if problem:
                    raise FieldError("arguments_schema", problem)
            return self


def _schema_problem(schema: dict[str, Any]) -> str:
    """Why the schema is refused, or "": it must check and validate in one
    pass, since it runs in a scorer thread on every tool call."""
    # jsonschema and RE2 load with the first schema, as for the json scorer.
    from runs.pools.json_schemas import schema_problem
    from runs.pools.json_validation import single_pass_size

    problem = schema_problem(schema)
    if problem:
        return problem
    if single_pass_size(schema) is None:
        return "must validate in one pass: no $ref, uniqueItems or unevaluated*"
    return schema_pattern_problem(schema)


@register
class ToolCalled(ToolCallScorer[ToolCalledParams]):
    """Passes when the trajectory called a tool, with arguments that match.

    With ``tool``: passes when between ``min_times`` and ``max_times`` calls of
    it have arguments holding ``arguments`` (a JSON subset) and satisfying
    ``arguments_schema``. With ``calls``: each expected call must be made by
    a different call (in the order given with ``in_order``); the value is the
    share of them found. Arguments the model sent as text are read as JSON;
    a text that is not (cut, or garbled) matches no argument pattern. Calls
    that failed count unless ``include_failed`` is false.
    """

    kind: ClassVar[str] = "tool_called"
    label: ClassVar[str] = "Tool called"
    example: ClassVar[dict[str, Any]] = {
        "tool": "search",
        "arguments": {"query": "capital of France"},
    }

    def __init__(self, name: str, params: ToolCalledParams) -> None:
        super().__init__(name, params)
        self.expected = expected_calls(params.calls or [], source="calls")
        self.validator: Any = None
        if params.arguments_schema is not None:
            # Loaded with the first scorer that has a schema (see above).
            from runs.pools.json_validation import validator_for

            self.validator = validator_for(params.arguments_schema)

    def score_trajectory(
        self, calls: list[ToolCall], steps: list[Step]
    ) -> ScoreOutcome:
        if not self.params.include_failed:
            calls = [call for call in calls if not call.failed]
        if self.params.calls is not None:
            return self.score_calls(self.expected, calls)
        return self.score_tool(calls)

    def arguments_match(self, call: ToolCall, arguments: dict[str, Any] | None) -> bool:
        if arguments is None:
            return True
        return call.parsed and is_subset(arguments, call.arguments)

    def score_tool(self, calls: list[ToolCall]) -> ScoreOutcome:
        params = self.params
        tool = params.tool or ""
        named = [call for call in calls if call.name == tool]
        matching = [
            call
            for call in named
            if self.arguments_match(call, params.arguments) and self.valid(call)
        ]
        count = len(matching)
        high = params.max_times
        passed = count >= params.min_times and (high is None or count <= high)
        wanted = f"at least {params.min_times}" + (
            f", at most {high}" if high is not None else ""
        )
        where = ", ".join(str(call.position) for call in matching[:20])
        reason = f"{tool} called {count} time(s) as asked ({wanted})"
        if where:
            reason += f"; steps {where}"
        if not matching and named:
            reason += (
                f"; {len(named)} call(s) did not match, the first {describe(named[0])}"
            )
            reason += self.why_not(named[0])
        elif not named:
            others = sorted({call.name for call in calls})
            reason += f"; tools called: {', '.join(others[:20]) or 'none'}"
        return ScoreOutcome(1.0 if passed else 0.0, passed, reason)

    def valid(self, call: ToolCall) -> bool:
        if self.validator is None:
            return True
        return call.parsed and self.validator.is_valid(call.arguments)

    def why_not(self, call: ToolCall) -> str:
        if not call.parsed:
            return " (its arguments are not JSON: cut or garbled)"
        if self.validator is not None and not self.validator.is_valid(call.arguments):
            error = next(iter(self.validator.iter_errors(call.arguments)))
            return f" (schema: {quoted(error.message)})"
        return (
            f" (wanted arguments holding {quoted(json.dumps(self.params.arguments))})"
        )

    def score_calls(
        self, expected: list[ExpectedCall], calls: list[ToolCall]
    ) -> ScoreOutcome:
        def matches(want: ExpectedCall, call: ToolCall) -> bool:
            return call.name == want.tool and self.arguments_match(call, want.arguments)

        missing = ""
        if self.params.in_order:
            found = in_order(expected, calls, matches)
            how = "in order"
        else:
            pairs = any_order(expected, calls, matches)
            found = sum(j is not None for j in pairs)
            how = "in any order"
            absent = [w.tool for w, j in zip(expected, pairs, strict=True) if j is None]
            if absent:
                missing = f"; not found: {', '.join(absent[:20])}"
        value = found / len(expected)
        reason = f"{found} of {len(expected)} expected calls made {how}{missing}"
        return ScoreOutcome(value, found == len(expected), reason)

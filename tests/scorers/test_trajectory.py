"""The trajectory scorers, each on the steps a target reported, as the executor
calls them (through a worker, with ``steps=``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runs.errors import ConfigError
from runs.plugins.scoring import ScorerCall
from runs.plugins.steps import Step
from runs.scorers import ScoreOutcome, build_scorer, clean_scorer_specs
from runs.scorers.stuck_loop import find_loop
from runs.scorers.trajectory import is_subset, tool_calls, trajectory_text
from tests.scorers.scoring import item


def tool(name: str, arguments: Any = None, **fields: Any) -> Step:
    return Step(kind="tool", name=name, arguments=arguments or {}, **fields)


def model(messages: Any = None, output: Any = None) -> Step:
    return Step(kind="model", name="gpt-test", arguments=messages, output=output)


async def judge(
    kind: str, steps: list[Step], expected: Any = None, **params: Any
) -> ScoreOutcome:
    spec = clean_scorer_specs([{"kind": kind, "params": params}])[0]
    call = ScorerCall(build_scorer(spec), "final", item(expected), steps)
    return await call.run()


# -- tool_called ---------------------------------------------------------------


async def test_tool_called_passes_with_a_matching_subset_of_arguments() -> None:
    steps = [
        model(),
        tool("search", {"query": "capital of France", "limit": 5}),
    ]
    outcome = await judge(
        "tool_called", steps, tool="search", arguments={"query": "capital of France"}
    )
    assert outcome.passed is True
    assert "steps 1" in outcome.reason


async def test_tool_called_fails_on_a_changed_argument_and_says_why() -> None:
    steps = [tool("search", {"query": "capital of Spain"})]
    outcome = await judge(
        "tool_called", steps, tool="search", arguments={"query": "capital of France"}
    )
    assert outcome.passed is False
    assert "did not match" in outcome.reason
    assert "capital of France" in outcome.reason


async def test_tool_called_reads_arguments_sent_as_json_text() -> None:
    steps = [tool("search", '{"query": "x", "page": 2}')]
    outcome = await judge("tool_called", steps, tool="search", arguments={"page": 2})
    assert outcome.passed is True


async def test_tool_called_never_matches_arguments_that_are_not_json() -> None:
    steps = [tool("search", '{"query": "x", "pa')]  # cut, or garbled by the model
    outcome = await judge("tool_called", steps, tool="search", arguments={"query": "x"})
    assert outcome.passed is False
    assert "not JSON" in outcome.reason


async def test_tool_called_without_arguments_needs_only_the_tool() -> None:
    assert (await judge("tool_called", [tool("fetch")], tool="fetch")).passed is True
    missing = await judge("tool_called", [tool("fetch")], tool="search")
    assert missing.passed is False
    assert "tools called: fetch" in missing.reason


async def test_tool_called_with_a_schema() -> None:
    schema = {
        "type": "object",
        "required": ["page"],
        "properties": {"page": {"type": "integer", "minimum": 1}},
    }
    good = await judge(
        "tool_called",
        [tool("fetch", {"page": 3})],
        tool="fetch",
        arguments_schema=schema,
    )
    bad = await judge(
        "tool_called",
        [tool("fetch", {"page": 0})],
        tool="fetch",
        arguments_schema=schema,
    )
    assert good.passed is True
    assert bad.passed is False
    assert "schema" in bad.reason


def test_tool_called_refuses_a_schema_that_is_not_single_pass() -> None:
    schema = {"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a"}
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs(
            [
                {
                    "kind": "tool_called",
                    "params": {"tool": "t", "arguments_schema": schema},
                }
            ]
        )
    assert caught.value.field == "scorers[0].params.arguments_schema"


async def test_tool_called_counts_times() -> None:
    steps = [tool("ping"), tool("ping"), tool("ping")]
    assert (await judge("tool_called", steps, tool="ping", min_times=3)).passed
    over = await judge("tool_called", steps, tool="ping", max_times=2)
    assert over.passed is False


async def test_tool_called_can_leave_out_failed_calls() -> None:
    steps = [tool("fetch", error="HTTP 500")]
    assert (await judge("tool_called", steps, tool="fetch")).passed is True
    left_out = await judge("tool_called", steps, tool="fetch", include_failed=False)
    assert left_out.passed is False


async def test_tool_called_calls_in_order_and_in_any_order() -> None:
    steps = [tool("fetch", {"page": 1}), tool("search", {"q": "a"})]
    calls = ["search", {"tool": "fetch", "arguments": {"page": 1}}]
    anyhow = await judge("tool_called", steps, calls=calls)
    ordered = await judge("tool_called", steps, calls=calls, in_order=True)
    assert (anyhow.value, anyhow.passed) == (1.0, True)
    assert (ordered.value, ordered.passed) == (0.5, False)


async def test_tool_called_needs_a_different_call_for_each_expected_one() -> None:
    # A loose pattern first must not take the only call the strict one matches.
    steps = [tool("fetch", {"page": 1}), tool("fetch", {"page": 2})]
    calls = [{"tool": "fetch"}, {"tool": "fetch", "arguments": {"page": 1}}]
    assert (await judge("tool_called", steps, calls=calls)).passed is True
    once = [tool("fetch", {"page": 1})]
    outcome = await judge("tool_called", once, calls=calls)
    assert (outcome.value, outcome.passed) == (0.5, False)


def test_tool_called_takes_tool_or_calls() -> None:
    for params in ({}, {"tool": "a", "calls": ["a"]}):
        with pytest.raises(ConfigError) as caught:
            clean_scorer_specs([{"kind": "tool_called", "params": params}])
        assert caught.value.field == "scorers[0].params.tool"
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs(
            [{"kind": "tool_called", "params": {"calls": [{"tool": ""}]}}]
        )
    assert caught.value.field == "scorers[0].params.calls"


def test_subset_tells_true_from_one() -> None:
    assert is_subset({"a": 1}, {"a": 1.0, "b": 2})
    assert not is_subset({"a": True}, {"a": 1})
    assert not is_subset({"a": [1]}, {"a": [1, 2]})
    assert is_subset(
        {"a": {"b": [1, {"c": "d"}]}}, {"a": {"b": [1, {"c": "d", "e": 0}]}}
    )


# -- trajectory_match ------------------------------------------------------------


ABC = [tool("a"), tool("b"), tool("c")]


@pytest.mark.parametrize(
    ("mode", "expected", "value", "passed"),
    [
        ("exact", ["a", "b", "c"], 1.0, True),
        ("exact", ["a", "c"], 2 / 3, False),  # one call too many
        ("in_order", ["a", "c"], 1.0, True),
        ("in_order", ["c", "a"], 0.5, False),
        ("subset", ["c", "a"], 1.0, True),
        ("subset", ["c", "d"], 0.5, False),
    ],
)
async def test_trajectory_match_modes(
    mode: str, expected: list[str], value: float, passed: bool
) -> None:
    outcome = await judge("trajectory_match", ABC, mode=mode, expected=expected)
    assert outcome.value == pytest.approx(value)
    assert outcome.passed is passed


async def test_trajectory_match_reads_the_expected_answer() -> None:
    expected = {"tool_calls": [{"tool": "b", "arguments": {"x": 1}}]}
    steps = [tool("a"), tool("b", {"x": 1, "y": 2})]
    outcome = await judge("trajectory_match", steps, expected=json.dumps(expected))
    assert outcome.passed is True


async def test_trajectory_match_a_threshold_below_one() -> None:
    outcome = await judge(
        "trajectory_match", ABC, mode="in_order", expected=["a", "x"], threshold=0.5
    )
    assert (outcome.value, outcome.passed) == (0.5, True)


async def test_trajectory_match_with_an_unreadable_expected_answer_is_an_error() -> (
    None
):
    spec = clean_scorer_specs([{"kind": "trajectory_match"}])[0]
    call = ScorerCall(build_scorer(spec), "x", item("not a list"), ABC)
    with pytest.raises(ValueError, match="the expected answer"):
        await call.run()


async def test_trajectory_match_no_steps_and_none_expected() -> None:
    outcome = await judge("trajectory_match", [], mode="exact", expected=[])
    assert outcome.passed is True
    assert (await judge("trajectory_match", [], expected=["a"])).value == 0.0


# -- max_steps -------------------------------------------------------------------


async def test_max_steps_counts_all_or_one_kind() -> None:
    steps = [model(), tool("a"), model(), tool("b"), model()]
    assert (await judge("max_steps", steps, max_steps=5)).passed is True
    assert (await judge("max_steps", steps, max_steps=4)).passed is False
    tools = await judge("max_steps", steps, max_steps=2, count="tool")
    assert tools.passed is True
    assert "3 model, 2 tool" in tools.reason


async def test_max_steps_with_no_steps_passes() -> None:
    assert (await judge("max_steps", [], max_steps=0)).passed is True


# -- stuck_loop ------------------------------------------------------------------


async def test_stuck_loop_finds_the_same_call_repeated() -> None:
    steps = [tool("search", {"q": "x"}), model()] * 3
    outcome = await judge("stuck_loop", steps, repeats=3)
    assert outcome.passed is False
    assert "the same call search" in outcome.reason


async def test_stuck_loop_sees_the_same_call_whatever_its_key_order() -> None:
    steps = [
        tool("s", {"a": 1, "b": 2}),
        tool("s", {"b": 2, "a": 1}),
        tool("s", '{"a":1,"b":2}'),
    ]
    assert (await judge("stuck_loop", steps, repeats=3)).passed is False


async def test_stuck_loop_passes_when_the_arguments_change() -> None:
    steps = [tool("search", {"q": str(n)}) for n in range(10)]
    assert (await judge("stuck_loop", steps)).passed is True


async def test_stuck_loop_finds_a_cycle() -> None:
    steps = [tool("a"), tool("b")] * 3
    outcome = await judge("stuck_loop", steps, repeats=3, max_cycle=2)
    assert outcome.passed is False
    assert "a cycle of 2 calls (a, b)" in outcome.reason
    assert (await judge("stuck_loop", steps, repeats=3, max_cycle=1)).passed is True


def test_find_loop_needs_every_repeat_in_a_row() -> None:
    calls = tool_calls([tool("a"), tool("a"), tool("b"), tool("a"), tool("a")])
    assert find_loop(calls, repeats=3, max_cycle=1) is None
    assert find_loop(calls, repeats=2, max_cycle=1) == (0, 1)
    cycle = tool_calls([tool("x"), tool("a"), tool("b"), tool("a"), tool("b")])
    assert find_loop(cycle, repeats=2, max_cycle=2) == (1, 2)


# -- tool_errors -----------------------------------------------------------------


async def test_tool_errors_counts_failures_per_tool() -> None:
    steps = [
        tool("fetch", error="HTTP 500", error_type="ToolError"),
        tool("fetch"),
        tool("search", error="timed out", error_type="Timeout"),
        tool("search"),
    ]
    outcome = await judge("tool_errors", steps)
    assert outcome.passed is False
    assert outcome.value == 0.5
    assert "2 of 4 tool calls failed" in outcome.reason
    assert "fetch 1" in outcome.reason and "search 1" in outcome.reason
    assert (await judge("tool_errors", steps, max_errors=2)).passed is True
    assert (
        await judge("tool_errors", steps, max_errors=9, max_rate=0.25)
    ).passed is False


async def test_tool_errors_without_tool_calls_passes() -> None:
    outcome = await judge("tool_errors", [model()])
    assert (outcome.value, outcome.passed) == (1.0, True)


# -- tool_waste ------------------------------------------------------------------


def sent(*results: tuple[str, str]) -> list[dict[str, Any]]:
    """The messages of a model call that was sent these (call id, result)s."""
    return [{"role": "user", "content": "go"}] + [
        {"role": "tool", "tool_call_id": call_id, "content": text}
        for call_id, text in results
    ]


async def test_tool_waste_counts_a_failed_call_repeated_unchanged() -> None:
    steps = [
        tool("fetch", {"url": "u"}, error="HTTP 500", call_id="1"),
        model(sent(("1", "error"))),
        tool("fetch", {"url": "u"}, error="HTTP 500", call_id="2"),
        model(sent(("1", "error"), ("2", "error"))),
        tool("fetch", {"url": "v"}, output="page", call_id="3"),
        model(sent(("3", "page"))),
    ]
    outcome = await judge("tool_waste", steps)
    assert outcome.passed is False
    assert "1 of 3 tool calls wasted" in outcome.reason
    assert "1 repeated a failed call" in outcome.reason


async def test_tool_waste_counts_a_result_no_later_model_call_was_sent() -> None:
    steps = [
        model(sent()),
        tool("search", {"q": "a"}, output="result A", call_id="a"),
        tool("search", {"q": "b"}, output="result B", call_id="b"),
        model(sent(("a", "result A"))),  # b's result never went back
        tool("final_answer", {"answer": "A"}, output="A"),
    ]
    outcome = await judge("tool_waste", steps)
    assert "1 with a result never used" in outcome.reason
    assert "search" in outcome.reason and "step 2" in outcome.reason
    assert outcome.value == pytest.approx(2 / 3)


async def test_tool_waste_finds_a_result_sent_as_text_without_its_id() -> None:
    steps = [
        tool("lookup", {"k": 1}, output={"price": 42}),
        model([{"role": "user", "content": 'lookup said {"price": 42}'}]),
    ]
    assert (await judge("tool_waste", steps)).passed is True


async def test_tool_waste_checks_can_be_turned_off() -> None:
    steps = [tool("search", output="never sent")]
    assert (await judge("tool_waste", steps)).passed is False
    assert (await judge("tool_waste", steps, unused_results=False)).passed is True


# -- the judge's {trajectory} ---------------------------------------------------


def test_trajectory_text_shows_both_ends_of_a_long_trajectory() -> None:
    steps = [tool("step", {"n": n}, output="x" * 50) for n in range(1000)]
    text = trajectory_text(steps, 2_000)
    assert len(text) <= 2_000
    assert text.startswith("[0] tool step")
    assert "[999] tool step" in text
    assert "steps left out" in text


def test_trajectory_text_marks_errors_and_model_replies() -> None:
    steps = [
        model(
            output={"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}
        ),
        tool("f", {"a": 1}, error="boom"),
    ]
    text = trajectory_text(steps, 10_000)
    assert "[0] model gpt-test -> asks for f" in text
    assert '[1] tool f({"a":1}) -> ERROR boom' in text

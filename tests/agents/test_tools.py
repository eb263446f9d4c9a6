"""Each tool kind alone: its result, and its failures as clear errors."""

from __future__ import annotations

import pytest

from runs.calls.limits import use_call_rate
from runs.plugins.targets import TargetError, TargetInput
from runs.plugins.tools import ToolError, build_tool
from runs.targets.agent import AgentTarget
from tests.agents.conftest import agent_config, three_tools


def tool(kind: str, **params: object):
    return build_tool({"kind": kind, "name": kind, "params": params})


async def test_the_code_tool_runs_code_in_the_sandbox() -> None:
    code = tool("code", timeout_seconds=5)
    await code.prepare()

    assert await code.call({"code": "print(6 * 7)"}) == {
        "exit_status": 0,
        "output": "42\n",
    }
    failed = await code.call({"code": "1 / 0"})
    assert failed["exit_status"] == 1
    assert "ZeroDivisionError" in failed["output"]
    with pytest.raises(ToolError, match="timed out after 1 s"):
        await tool("code", timeout_seconds=1).call({"code": "while True: pass"})
    with pytest.raises(ToolError, match="code must be a string"):
        await code.call({"code": 3})


async def test_a_python_tools_errors_are_told_not_raised() -> None:
    add = tool("python", callable="runs.tools.examples.add")
    assert await add.call({"a": 2, "b": 3}) == 5
    with pytest.raises(ToolError, match=r"TypeError: .*unexpected keyword"):
        await add.call({"a": 2, "c": 3})


class Adder:
    async def __call__(self, a: float, b: float) -> float:
        return a + b


adder = Adder()


async def test_a_python_tool_awaits_an_object_whose_call_is_async(settings) -> None:
    settings.EVALSITE_PYTHON_TOOLS = ["tests.agents.test_tools.adder"]
    add = tool("python", callable="tests.agents.test_tools.adder")
    assert await add.call({"a": 2, "b": 3}) == 5


async def test_final_answer_needs_its_answer() -> None:
    final = tool("final_answer")
    assert final.final
    assert await final.call({"answer": [1, 2]}) == [1, 2]
    with pytest.raises(ToolError, match="answer is missing"):
        await final.call({})


async def test_a_call_of_a_tool_that_does_not_exist_is_told_to_the_model(
    agent_model, tool_url
) -> None:
    target = AgentTarget.from_config(agent_config(agent_model, three_tools(tool_url)))
    step, final = await target.call_tool(
        {"id": "c1", "function": {"name": "rm", "arguments": "{}"}}
    )
    assert (step.error_type, final) == ("UnknownTool", False)
    assert step.error == "there is no tool 'rm' (tools: add, lookup, search)"
    step, _ = await target.call_tool(
        {"id": "c2", "function": {"name": "add", "arguments": "[1, 2]"}}
    )
    assert step.error == "the arguments must be a JSON object"
    await target.aclose()


async def test_a_reply_without_tool_calls_ends_the_loop_with_its_content(
    agent_model, tool_url
) -> None:
    target = AgentTarget.from_config(
        agent_config(agent_model, three_tools(tool_url), system_prompt="Be brief.")
    )
    item = TargetInput(
        index=0, external_id="a", input="What is 4 * 4? [[agent_rounds:0]]"
    )
    answer = await target.generate(item)
    await target.aclose()

    assert answer.output == "16"
    (step,) = answer.steps
    assert step.arguments[0] == {"role": "system", "content": "Be brief."}


async def test_a_conversation_with_its_own_system_message_keeps_it_alone(
    agent_model, tool_url
) -> None:
    target = AgentTarget.from_config(
        agent_config(agent_model, three_tools(tool_url), system_prompt="Be brief.")
    )
    conversation = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "What is 4 * 4? [[agent_rounds:1]]"},
    ]
    item = TargetInput(index=0, external_id="a", input=[*conversation])
    answer = await target.generate(item)
    await target.aclose()

    assert answer.steps[0].arguments == conversation
    assert item.input == conversation  # the loop's messages are its own list


def test_the_request_shown_for_an_item_holds_the_tools_never_a_secret(
    agent_model, tool_url
) -> None:
    config = agent_config(agent_model, three_tools(tool_url, auth_secret="KEY"))
    params = AgentTarget.parse(config)
    item = TargetInput(index=0, external_id="a", input="What is 1 + 1?")

    request = AgentTarget.request_for(params, item)

    assert request["messages"] == [{"role": "user", "content": "What is 1 + 1?"}]
    assert [t["function"]["name"] for t in request["tools"]] == [
        "add",
        "lookup",
        "search",
    ]
    assert "KEY" not in str(request["tools"])


async def test_an_agent_that_ignores_results_repeats_the_same_call(
    agent_model, tool_url
) -> None:
    target = AgentTarget.from_config(agent_config(agent_model, three_tools(tool_url)))
    item = TargetInput(
        index=0,
        external_id="a",
        input="What is 2 + 2? [[agent_rounds:3]] [[agent_ignore]]",
    )
    answer = await target.generate(item)
    await target.aclose()

    calls = [(s.name, s.arguments) for s in answer.steps if s.kind == "tool"]
    assert len(calls) == 3 and len(set(map(str, calls))) == 1
    assert answer.output == "4"


class CountingRate:
    def __init__(self) -> None:
        self.taken = 0

    async def acquire(self) -> None:
        self.taken += 1


async def test_every_model_call_after_the_first_is_paced_by_the_runs_rate(
    agent_model, tool_url
) -> None:
    target = AgentTarget.from_config(agent_config(agent_model, three_tools(tool_url)))
    rate = CountingRate()
    item = TargetInput(
        index=0, external_id="a", input="What is 1 + 5? [[agent_rounds:3]]"
    )

    with use_call_rate(rate):
        answer = await target.generate(item)
    await target.aclose()

    model_calls = sum(1 for s in answer.steps if s.kind == "model")
    assert model_calls == 4
    # The executor paces an attempt's first call; the loop, the others.
    assert rate.taken == model_calls - 1


async def test_a_transient_model_failure_is_tried_again_a_permanent_one_not(
    agent_model, tool_url
) -> None:
    target = AgentTarget.from_config(
        agent_config(agent_model, three_tools(tool_url), call_max_attempts=3)
    )
    flaky = TargetInput(index=0, external_id="a", input="What is 2 + 3? [[flaky:1]]")
    answer = await target.generate(flaky)
    assert answer.output == "5"
    assert [s.error for s in answer.steps] == ["", "", ""]

    refused = TargetInput(index=1, external_id="b", input="Hi [[status:400]]")
    with pytest.raises(TargetError) as caught:
        await target.generate(refused)
    await target.aclose()
    assert caught.value.error_type == "HTTP400"
    (step,) = caught.value.usage.steps
    assert (step.kind, step.error_type) == ("model", "HTTP400")
    assert agent_model.stats.statuses[400] == 1  # not tried again

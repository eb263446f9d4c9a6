"""An agent's configuration: its tools validated by kind, each error naming
its place; a tool's secret only from the project, only where it is bound."""

from __future__ import annotations

import asyncio

import pytest

from runs.errors import ConfigError, InvalidInput
from runs.executor.engine import execute_run
from runs.models import Project, Result, RunStatus
from runs.plugins.targets import TargetInput, build_target, clean_target_config
from runs.testing.fake_openai import FakeOpenAIServer
from tests.agents.conftest import agent_config, three_tools
from tests.factories import set_bound_secret


def refused(config: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        clean_target_config("agent", config)
    return f"{caught.value.field}: {caught.value.message}"


def test_each_tool_is_validated_by_its_kind(agent_model: FakeOpenAIServer) -> None:
    def tools(*specs: dict) -> dict:
        return agent_config(agent_model, list(specs))

    assert refused(tools({"kind": "shell", "name": "sh"})).startswith(
        "config.tools[0].kind: unknown tool kind 'shell'"
    )
    python = {"kind": "python", "name": "f", "params": {"callable": "os.system"}}
    assert refused(tools(python)).startswith(
        "config.tools[0].params.callable: 'os.system' is not in EVALSITE_PYTHON_TOOLS"
    )
    final = {"kind": "final_answer", "name": "done"}
    assert refused(tools(final, final)) == "config.tools[1].name: 'done' is repeated"
    assert refused(tools({**final, "name": "a b"})).startswith("config.tools[0].name")
    http = {"kind": "http", "name": "h", "params": {"url": "ftp://x"}}
    assert refused(tools(http)).startswith("config.tools[0].params.url")
    assert refused(tools()).startswith("config.tools")


def test_defaults_of_a_tools_parameters_are_stored(agent_model) -> None:
    cleaned = clean_target_config(
        "agent", agent_config(agent_model, [{"kind": "final_answer", "name": "f"}])
    )
    assert cleaned["tools"] == [
        {
            "kind": "final_answer",
            "name": "f",
            "description": "",
            "params": {"timeout_seconds": 30.0},
        }
    ]


async def test_the_model_is_sent_each_tools_schema(agent_model, tool_url) -> None:
    target = build_target("agent", agent_config(agent_model, three_tools(tool_url)))
    item = TargetInput(index=0, external_id="a", input="What is 2 + 5?")
    answer = await target.generate(item)
    await target.aclose()

    sent = agent_model.stats.last_request["tools"]
    assert [tool["function"]["name"] for tool in sent] == ["add", "lookup", "search"]
    search = sent[2]["function"]["parameters"]
    assert search == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    }
    assert answer.output == "7"
    assert [s.kind for s in answer.steps] == ["model", "tool", "model"]
    assert answer.prompt_tokens == sum(s.prompt_tokens for s in answer.steps[::2])


@pytest.mark.django_db(transaction=True)
def test_a_tools_secret_comes_from_the_project_and_goes_where_it_is_bound(
    project: Project, alice, make_agent_run, agent_model, tool_url, seen
) -> None:
    set_bound_secret(project, alice, "TOOL_KEY", "tool-s3cret", url=tool_url)
    tools = three_tools(tool_url, auth_secret="TOOL_KEY")
    run = make_agent_run(
        [{"input": "What is 1 + 2? [[agent_rounds:3]]"}],
        agent_config(agent_model, tools),
    )

    assert asyncio.run(execute_run(run.pk)) == RunStatus.COMPLETED

    assert seen.authorization == {"Bearer tool-s3cret"}
    assert Result.objects.get(run=run).output == "3"


@pytest.mark.django_db
def test_a_tools_secret_bound_elsewhere_is_refused_naming_the_tool(
    project: Project, alice, make_agent_run, agent_model, tool_url
) -> None:
    set_bound_secret(project, alice, "TOOL_KEY", "v", url="https://else.example.org")
    tools = three_tools(tool_url, auth_secret="TOOL_KEY")

    with pytest.raises(InvalidInput) as caught:
        make_agent_run([{"input": "x"}], agent_config(agent_model, tools))

    assert caught.value.field == "target_config.tools[2].params.auth_secret"

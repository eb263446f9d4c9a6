"""openai_chat against the local fake server: conversations, JSON mode, tools and
the raw response kept on the attempt."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from runs.errors import ConfigError
from runs.executor.engine import execute_run
from runs.models import ErrorKind, Project, Result, RunStatus
from runs.results.selectors import result_request
from runs.results.services import run_create
from runs.targets import TargetError, TargetInput, build_target, clean_target_config
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import make_dataset

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


def item(input: Any) -> TargetInput:
    return TargetInput(index=0, external_id="c1", input=input, expected="4")


async def generate(fake: FakeOpenAIServer, the_item: TargetInput, **config: Any):
    full = {"base_url": fake.base_url, "model": "fake", **config}
    target = build_target("openai_chat", clean_target_config("openai_chat", full))
    try:
        return await target.generate(the_item)
    finally:
        await target.aclose()


# -- conversations -------------------------------------------------------------------


async def test_a_conversation_is_sent_as_it_is_after_the_system_prompt(fake_openai):
    conversation = [
        {"role": "user", "content": "My name is Zoë."},
        {"role": "assistant", "content": "Hello Zoë!"},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    answer = await generate(fake_openai, item(conversation), system_prompt="Be brief.")
    sent = fake_openai.stats.last_request["messages"]
    assert sent == [{"role": "system", "content": "Be brief."}, *conversation]
    assert answer.output == "4"


async def test_a_conversation_with_its_own_system_message_keeps_it_alone(
    fake_openai,
):
    conversation = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "What is 3 + 3?"},
    ]
    await generate(fake_openai, item(conversation), system_prompt="Be brief.")
    assert fake_openai.stats.last_request["messages"] == conversation


async def test_a_conversation_may_carry_tool_calls_and_results(fake_openai):
    conversation = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 °C"},
    ]
    answer = await generate(fake_openai, item(conversation))
    assert answer.output == "-3 °C"  # the fake echoes the last message


@pytest.mark.parametrize(
    ("conversation", "named"),
    [
        (
            [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}],
            "input[1].role",
        ),
        ([{"role": "user"}], "input[0].content"),
        ([{"role": "user", "content": 42}], "input[0].content"),
        ([{"role": "user", "content": "a"}, "b"], "input[1]"),
        ([{"role": "tool", "content": "72F"}], "input[0].tool_call_id"),
        ([{"role": "user", "content": [{"text": "no type"}]}], "input[0].content"),
    ],
)
async def test_a_malformed_conversation_is_a_permanent_error_naming_the_part(
    fake_openai, conversation, named
):
    with pytest.raises(TargetError) as caught:
        await generate(fake_openai, item(conversation))
    error = caught.value
    assert (error.kind, error.error_type) == (ErrorKind.PERMANENT, "InvalidMessages")
    assert f"item 'c1': {named} " in error.message
    assert fake_openai.stats.requests == 0


async def test_a_list_without_messages_is_a_templated_prompt(fake_openai):
    await generate(fake_openai, item(["a", "b"]), prompt_template="Sort: {input}")
    sent = fake_openai.stats.last_request["messages"]
    assert sent == [{"role": "user", "content": 'Sort: ["a", "b"]'}]


# -- JSON mode and tools -------------------------------------------------------------


async def test_json_mode_is_passed_through(fake_openai):
    answer = await generate(
        fake_openai, item("What is 5 * 5?"), response_format={"type": "json_object"}
    )
    assert fake_openai.stats.last_request["response_format"] == {"type": "json_object"}
    assert json.loads(answer.output) == {"answer": "25"}


async def test_tool_calls_in_the_reply_are_kept_with_the_content(fake_openai):
    answer = await generate(
        fake_openai,
        item("find cats [[tool:search]]"),
        tools=[SEARCH],
        tool_choice={"type": "function", "function": {"name": "search"}},
    )
    request = fake_openai.stats.last_request
    assert request["tools"] == [SEARCH]
    assert request["tool_choice"]["function"]["name"] == "search"
    assert answer.output["content"] is None
    (call,) = answer.output["tool_calls"]
    assert call["function"]["name"] == "search"
    assert json.loads(call["function"]["arguments"]) == {"query": "find cats"}


async def test_a_reply_without_tool_calls_is_its_content(fake_openai):
    answer = await generate(fake_openai, item("What is 1 + 1?"), tools=[SEARCH])
    assert answer.output == "2"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"response_format": {"type": "yaml"}}, "config.response_format.type"),
        (
            {"response_format": {"type": "json_schema"}},
            "config.response_format.json_schema",
        ),
        ({"tools": [{"type": "retrieval"}]}, "config.tools[0].type"),
        (
            {"tools": [{"type": "function", "function": {}}]},
            "config.tools[0].function.name",
        ),
        ({"tools": [SEARCH, SEARCH]}, "config.tools[1].function.name"),
        ({"tool_choice": "auto"}, "config.tool_choice"),
        ({"tools": [SEARCH], "tool_choice": "always"}, "config.tool_choice"),
        (
            {
                "tools": [SEARCH],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            "config.tool_choice",
        ),
        ({"tools": "search"}, "config.tools"),
    ],
)
def test_bad_json_mode_and_tool_settings_name_the_field(config, field):
    with pytest.raises(ConfigError) as caught:
        clean_target_config(
            "openai_chat", {"base_url": "http://127.0.0.1/v1", "model": "m", **config}
        )
    assert caught.value.field == field


# -- the raw response -----------------------------------------------------------------


def chat_run(project: Project, fake: FakeOpenAIServer, items: list[dict], **config):
    return run_create(
        user=None,
        dataset=make_dataset(project, items),
        target_kind="openai_chat",
        target_config={"base_url": fake.base_url, "model": "fake", **config},
        scorers=["exact_match"],
        launch=False,
    )


@pytest.mark.django_db(transaction=True)
async def test_a_run_over_conversations_keeps_each_raw_response(project, fake_openai):
    items = [
        {
            "id": "c1",
            "input": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "What is 6 * 7?"},
            ],
            "expected": "42",
        },
        {"id": "c2", "input": "What is 1 + 2?", "expected": "3"},
    ]
    run = await sync_to_async(chat_run)(project, fake_openai, items)
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    result = await Result.objects.aget(run=run, item_index=0)
    assert result.output == "42"
    raw = json.loads(result.attempts[0]["raw_body"])
    assert raw["choices"][0]["message"]["content"] == "42"
    assert raw["usage"]["completion_tokens"] == 1


@pytest.mark.django_db(transaction=True)
async def test_tool_calls_are_stored_as_the_output(project, fake_openai):
    items = [{"input": "weather in Oslo [[tool]]", "expected": "x"}]
    run = await sync_to_async(chat_run)(project, fake_openai, items, tools=[SEARCH])
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert result.status == Result.Status.SUCCEEDED
    assert result.output["tool_calls"][0]["function"]["name"] == "search"
    assert "tool_calls" in result.attempts[0]["raw_body"]


@pytest.mark.django_db(transaction=True)
async def test_the_raw_response_can_be_left_out(project, fake_openai):
    items = [{"input": "What is 1 + 2?", "expected": "3"}]
    run = await sync_to_async(chat_run)(
        project, fake_openai, items, keep_raw_response=False
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert "raw_body" not in result.attempts[0]


@pytest.mark.django_db(transaction=True)
async def test_a_bad_conversation_fails_its_item_only(project, fake_openai):
    items = [
        {"id": "bad", "input": [{"role": "user", "content": 7}], "expected": "7"},
        {"id": "good", "input": "What is 3 + 4?", "expected": "7"},
    ]
    run = await sync_to_async(chat_run)(project, fake_openai, items)
    assert await execute_run(run.pk) == RunStatus.COMPLETED_WITH_ERRORS
    bad = await Result.objects.aget(run=run, item_index=0)
    assert bad.error_type == "InvalidMessages"
    assert "input[0].content" in bad.error_message
    assert len(bad.attempts) == 1


# -- what a result's page shows of the call ----------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_request_shown_is_the_request_sent_and_the_finish_reason_is_kept(
    project, fake_openai
):
    items = [{"id": "c1", "input": "What is 1 + 2?", "expected": "3"}]
    run = await sync_to_async(chat_run)(
        project,
        fake_openai,
        items,
        system_prompt="Be brief.\nJust the number.",
        prompt_template="Q: {input}\nA:",
        max_tokens=32,
        extra_body={"seed": 7},
    )
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    result = await Result.objects.select_related("item").aget(run=run)

    shown = await sync_to_async(result_request)(run=run, item=result.item)

    assert shown == fake_openai.stats.last_request
    assert result.attempts[-1]["finish_reason"] == "stop"


def test_a_reply_cut_at_max_tokens_says_so():
    target = build_target(
        "openai_chat",
        clean_target_config(
            "openai_chat", {"base_url": "https://api.example.org/v1", "model": "m"}
        ),
    )
    reply = {
        "model": "m",
        "choices": [
            {"message": {"content": "Step 1: 48 / 2 = "}, "finish_reason": "length"}
        ],
    }

    answer = target.parse_response(httpx.Response(200, json=reply))

    assert answer.finish_reason == "length"

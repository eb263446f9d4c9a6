"""The http target reads an agent's trajectory from its answer, and tells the
agent where its spans belong."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runs.executor.engine import execute_run
from runs.models import Result, Step
from runs.results.services import run_create
from runs.targets import TargetError, TargetInput, build_target, clean_target_config
from runs.targets.base import TargetContext
from tests.factories import make_dataset
from tests.local_http import serve
from tests.targets.agent_server import fresh_handler

ITEM = TargetInput(index=4, external_id="q4", input="2+2?", epoch=1)


async def answer(url: str, mode: str, *, run_id: int | None = 7, **config):
    full = {"url": url, "body": {"mode": mode}, "output_path": "answer", **config}
    target = build_target(
        "http", clean_target_config("http", full), context=TargetContext(run_id=run_id)
    )
    try:
        return await target.generate(ITEM)
    finally:
        await target.aclose()


@pytest.fixture
def agent():
    handler = fresh_handler()
    with serve(handler) as base_url:
        yield f"{base_url}/agent", handler


async def test_steps_in_evalsites_shape_are_kept_with_their_usage(agent):
    url, _ = agent
    got = await answer(url, "steps", steps_path="trace")
    assert got.output == "4"
    assert [(s.kind, s.name) for s in got.steps] == [
        ("model", "small-model"),
        ("tool", "add"),
        ("model", "small-model"),
    ]
    assert got.steps[1].arguments == {"a": 2, "b": 2} and got.steps[1].output == 4
    assert (got.prompt_tokens, got.completion_tokens) == (50, 7)
    assert got.steps[0].cost == 0.001
    assert got.steps[0].latency_ms == 12.5


async def test_openai_messages_are_read_as_model_and_tool_calls(agent):
    url, _ = agent
    got = await answer(url, "messages", steps_path="trace")
    assert [(s.kind, s.name) for s in got.steps] == [
        ("model", "assistant"),
        ("tool", "add"),
        ("tool", "log"),
        ("model", "assistant"),
    ]
    add, log = got.steps[1], got.steps[2]
    assert (add.arguments, add.output, add.call_id, add.error) == (
        {"a": 2, "b": 2},
        "4",
        "c1",
        "",
    )
    assert log.error_type == "InvalidArguments"
    assert got.steps[0].arguments == [{"role": "user", "content": "What is 2+2?"}]
    assert got.prompt_tokens is None  # the messages say nothing of tokens


async def test_a_trajectory_of_no_known_shape_is_a_clear_error(agent):
    url, _ = agent
    with pytest.raises(TargetError) as caught:
        await answer(url, "badsteps", steps_path="trace")
    assert "the response's trace[1].kind is 'thought'; one of model, tool" in str(
        caught.value
    )
    with pytest.raises(TargetError) as caught:
        await answer(url, "steps", steps_path="answer")
    assert "the response's answer is str, not a list" in str(caught.value)


async def test_the_run_item_and_epoch_go_in_headers_and_baggage(agent):
    url, handler = agent
    await answer(url, "echo", output_path="status")
    headers = handler.requests[-1]["headers"]
    assert (headers["x-evalsite-run"], headers["x-evalsite-item"]) == ("7", "4")
    assert headers["x-evalsite-epoch"] == "1"
    assert headers["baggage"] == (
        "evalsite.run_id=7,evalsite.item_index=4,evalsite.epoch=1"
    )


async def test_no_trace_headers_when_turned_off_or_outside_a_run(agent):
    url, handler = agent
    await answer(url, "echo", output_path="status", trace_headers=False)
    await answer(url, "echo", output_path="status", run_id=None)
    for request in handler.requests:
        assert "x-evalsite-run" not in request["headers"]
        assert "baggage" not in request["headers"]


@pytest.mark.django_db(transaction=True)
async def test_a_run_stores_the_trajectory_the_agent_answered(project, agent):
    url, _ = agent
    config = {"url": url, "body": {"mode": "steps"}, "output_path": "answer"}
    run = await sync_to_async(run_create)(
        user=None,
        dataset=await sync_to_async(make_dataset)(
            project, [{"id": "a", "input": "2+2?", "expected": "4"}]
        ),
        target_kind="http",
        target_config={**config, "steps_path": "trace"},
        scorers=["exact_match"],
        launch=False,
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    steps = [s async for s in Step.objects.filter(result=result).order_by("index")]
    assert [(s.index, s.kind, s.name) for s in steps] == [
        (0, "model", "small-model"),
        (1, "tool", "add"),
        (2, "model", "small-model"),
    ]
    assert (result.prompt_tokens, result.completion_tokens) == (50, 7)
    assert steps[1].call_hash and steps[0].cost == 0.001

"""Agent runs end to end against the fake model: steps stored with their
results, counts that add up, budgets, hostile tools and cancel."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.db.models import Count, Sum

from runs.analysis.export import run_export_lines
from runs.executor.engine import execute_run
from runs.models import ModelPrice, Result, Run, RunStatus, Step
from runs.plugins.steps import call_hash
from runs.results.services import run_cancel, run_launch
from tests.agents.conftest import agent_config, three_tools
from tests.executor.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def item(index: int) -> dict:
    """Items that take different paths: 1 to 3 rounds of 1 or 2 calls."""
    rounds, parallel = 1 + index % 3, 1 + index % 2
    text = f"What is {index} + {index % 7}?"
    return {
        "id": f"i{index}",
        "input": f"{text} [[agent_rounds:{rounds}]] [[agent_parallel:{parallel}]]",
        "expected": str(index + index % 7),
    }


def test_an_agent_run_of_200_items_stores_every_step_and_its_counts_add_up(
    make_agent_run, agent_model, tool_url, seen
):
    items = [item(index) for index in range(200)]
    run = make_agent_run(
        items, agent_config(agent_model, three_tools(tool_url)), concurrency=16
    )

    assert asyncio.run(execute_run(run.pk)) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert run.succeeded == run.total == 200
    results = Result.objects.filter(run=run)
    steps = Step.objects.filter(result__run=run)
    # Every model call the server answered is a stored model step, once.
    assert steps.filter(kind="model").count() == agent_model.stats.requests
    # Every call of the http tool is a stored tool step, once.
    assert steps.filter(kind="tool", name="search").count() == seen.calls["/echo"]
    for result in results.annotate(n=Count("steps")):
        index = result.item_index
        rounds, parallel = 1 + index % 3, 1 + index % 2
        assert result.n == (rounds + 1) + rounds * parallel
        assert list(
            result.steps.order_by("index").values_list("index", flat=True)
        ) == list(range(result.n))
    # A result's tokens are its steps', and the run's its results'.
    for result in results:
        sums = result.steps.aggregate(
            p=Sum("prompt_tokens"), c=Sum("completion_tokens")
        )
        assert (result.prompt_tokens, result.completion_tokens) == (
            sums["p"],
            sums["c"],
        )
    totals = steps.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert (run.prompt_tokens, run.completion_tokens) == (totals["p"], totals["c"])
    # Every answer is right: the model answered from the task after the tools.
    assert run.results.filter(scores__passed=True).count() == 200
    tool = steps.filter(kind="tool").first()
    assert tool.call_hash == call_hash(tool.name, tool.arguments)


def test_a_budget_ends_the_item_with_its_steps_kept(
    make_agent_run, agent_model, tool_url
):
    config = agent_config(agent_model, three_tools(tool_url), max_steps=3)
    run = make_agent_run(
        [{"input": "go on [[agent_loop]]"}, {"input": "What is 2 + 2?"}], config
    )
    asyncio.run(execute_run(run.pk))

    looped = Result.objects.get(run=run, item_index=0)
    assert looped.status == Result.Status.FAILED
    assert looped.error_type == "budget"
    assert "max_steps (3 model calls)" in looped.error_message
    kinds = list(looped.steps.order_by("index").values_list("kind", flat=True))
    assert kinds == ["model", "tool"] * 3
    assert looped.attempts[-1].get("prompt_tokens") == looped.prompt_tokens
    assert Result.objects.get(run=run, item_index=1).status == "succeeded"


def test_max_tool_calls_and_tokens_are_budgets_too(
    make_agent_run, agent_model, tool_url
):
    tools = three_tools(tool_url)
    run = make_agent_run(
        [{"input": "many [[agent_rounds:5]] [[agent_parallel:3]]"}],
        agent_config(agent_model, tools, max_tool_calls=4),
    )
    asyncio.run(execute_run(run.pk))
    result = Result.objects.get(run=run)
    assert result.error_type == "budget"
    assert "max_tool_calls (4)" in result.error_message
    assert result.steps.filter(kind="tool").count() == 3

    run = make_agent_run(
        [{"input": "many words in this task [[agent_loop]]"}],
        agent_config(agent_model, tools, max_tokens_total=40),
    )
    asyncio.run(execute_run(run.pk))
    result = Result.objects.get(run=run)
    assert result.error_type == "budget"
    assert "max_tokens_total (40) exceeded" in result.error_message


def test_hostile_tools_end_their_steps_with_clear_errors(
    make_agent_run, agent_model, tool_url, seen
):
    def tools(path: str, **http: object) -> list[dict]:
        return three_tools(tool_url, path=path, **http)[2:]  # the http tool alone

    cases = {
        "/error": ({}, "HTTP 500 Internal Server Error: the tool broke"),
        "/huge": (
            {"max_response_bytes": 1_000_000},
            "the answer is longer than 1,000,000 bytes",
        ),
        "/hang": ({"timeout_seconds": 0.2}, "did not answer within 0.2 s"),
    }
    for path, (http, message) in cases.items():
        config = agent_config(agent_model, tools(path, **http))
        run = make_agent_run([{"input": "What is 1 + 1?"}], config)
        assert asyncio.run(execute_run(run.pk)) == RunStatus.COMPLETED, path
        step = Step.objects.get(result__run=run, kind="tool")
        assert message in step.error, (path, step.error)
        # The model was told, and answered anyway.
        assert Result.objects.get(run=run).output == "2"
    seen.release.set()


def test_invalid_json_arguments_are_an_error_the_model_is_told(
    make_agent_run, agent_model, tool_url
):
    config = agent_config(agent_model, three_tools(tool_url))
    run = make_agent_run([{"input": "What is 3 + 3? [[agent_badargs]]"}], config)
    asyncio.run(execute_run(run.pk))
    result = Result.objects.get(run=run)
    assert result.status == "succeeded" and result.output == "6"
    bad = result.steps.get(kind="tool")
    assert bad.error_type == "InvalidArguments"
    assert bad.error.startswith("the arguments are not valid JSON")
    assert bad.arguments == "{not json"
    told = result.steps.filter(kind="model").order_by("index")[1].arguments
    assert told[0]["role"] == "tool" and told[0]["content"].startswith("error: ")


def test_cancel_reaches_a_tool_call_in_flight(
    make_agent_run, agent_model, tool_url, seen
):
    tools = three_tools(tool_url, path="/hang", timeout_seconds=3600)[2:]
    run = make_agent_run(
        [{"input": "wait"}], agent_config(agent_model, tools, max_seconds=3600)
    )
    run_launch(run=run)
    wait_for(lambda: seen.hanging == 1)

    run_cancel(run=run)

    wait_for(lambda: Run.objects.get(pk=run.pk).is_final)
    result = Result.objects.get(run=run)
    assert result.status == Result.Status.CANCELLED
    # The tool's request was closed, not left hanging.
    wait_for(lambda: seen.closed == 1)


def test_export_has_each_results_steps(make_agent_run, agent_model, tool_url):
    config = agent_config(agent_model, three_tools(tool_url))
    run = make_agent_run([item(1), item(2)], config)
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()

    rows = [json.loads(line) for line in run_export_lines(run=run, format="jsonl")]
    assert [row["step_count"] for row in rows] == [2 + 2 * 2 + 1, 3 + 3 * 1 + 1]
    assert [row["tool_call_count"] for row in rows] == [4, 3]
    assert [s["index"] for s in rows[0]["steps"]] == list(range(7))
    assert rows[0]["steps"][1]["kind"] == "tool"
    header = next(iter(run_export_lines(run=run, format="csv")))
    assert "step_count,tool_call_count" in header
    assert "steps" not in header.split(",")


def test_the_loop_ends_before_the_runs_timeout_with_its_steps_kept(
    make_agent_run, agent_model, tool_url, seen
):
    tools = three_tools(tool_url, path="/hang", timeout_seconds=3600)[2:]
    run = make_agent_run(
        [{"input": "wait"}],
        agent_config(agent_model, tools, max_seconds=3600),
        timeout_seconds=1,
        max_attempts=1,
    )

    asyncio.run(execute_run(run.pk))

    result = Result.objects.get(run=run)
    assert (result.status, result.error_type) == ("failed", "budget")
    assert "the run's timeout (1 s an attempt)" in result.error_message
    assert list(result.steps.values_list("kind", flat=True)) == ["model"]
    seen.release.set()


def test_a_results_cost_is_the_sum_of_its_steps_costs(
    make_agent_run, agent_model, tool_url
):
    ModelPrice.objects.create(
        model="fake", prompt_per_million=2, completion_per_million=8
    )
    config = agent_config(agent_model, three_tools(tool_url))
    run = make_agent_run([item(n) for n in range(6)], config)

    asyncio.run(execute_run(run.pk))

    run.refresh_from_db()
    for result in Result.objects.filter(run=run):
        models = result.steps.filter(kind="model")
        # Each model call priced by its tokens, independently of the executor.
        for step in models:
            expected = (2 * step.prompt_tokens + 8 * step.completion_tokens) / 1e6
            assert step.cost == pytest.approx(expected)
        assert result.cost == pytest.approx(sum(s.cost for s in models))
        assert not result.steps.filter(kind="tool").exclude(cost=None).exists()
    total = Step.objects.filter(result__run=run).aggregate(c=Sum("cost"))["c"]
    assert run.cost == pytest.approx(total)

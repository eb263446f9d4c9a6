"""The summary's figures of trajectories, held to numpy over the per-result counts."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from runs.analysis.summary import run_summary
from tests.factories import arithmetic_items, make_dataset
from tests.trajectories.steps import (
    answered_run,
    model_step,
    result_of,
    store_steps,
    tool_step,
)

API = "/api/v1"
# Tool calls of each item's trajectory: (tool, failed); item 5 has none stored.
PLANS = [
    [("search", False)],
    [("search", False), ("fetch", True), ("fetch", False)],
    [("search", True), ("search", True)],
    [],
    [("fetch", False)] * 7,
]


@pytest.fixture
def agent_run(project):
    run = answered_run(make_dataset(project, arithmetic_items(6)))
    for index, plan in enumerate(PLANS):
        steps = [model_step(prompt_tokens=10, completion_tokens=2, cost=0.001)]
        for n, (tool, failed) in enumerate(plan):
            steps.append(
                tool_step(
                    tool, {"n": n}, latency_ms=5.0, error="boom" if failed else ""
                )
            )
        store_steps(result_of(run, index), steps)
    run.refresh_from_db()  # marked by its steps
    return run


def test_steps_and_tool_calls_per_result_match_numpy(agent_run) -> None:
    steps = run_summary(run=agent_run).steps

    assert steps is not None
    # Every result counts; the one without a trajectory as 0 steps.
    tool_counts = [len(plan) for plan in PLANS] + [0]
    step_counts = [n + 1 for n in tool_counts[:-1]] + [0]
    assert (steps.results, steps.with_steps) == (6, 5)
    assert steps.steps == sum(step_counts)
    assert steps.tool_calls == sum(tool_counts)
    for name, q in (("p50", 50), ("p90", 90)):
        assert steps.steps_per_result[name] == pytest.approx(
            np.percentile(step_counts, q)
        )
        assert steps.tool_calls_per_result[name] == pytest.approx(
            np.percentile(tool_counts, q)
        )


def test_tool_error_rates_and_figures_per_kind(agent_run) -> None:
    steps = run_summary(run=agent_run).steps

    assert steps is not None
    tools = {t.tool: (t.calls, t.errors) for t in steps.tools}
    assert tools == {"fetch": (9, 1), "search": (4, 2)}
    assert [t.tool for t in steps.tools] == ["fetch", "search"]  # most calls first
    kinds = {k.kind: k for k in steps.kinds}
    assert kinds["model"].steps == 5
    assert (kinds["model"].prompt_tokens, kinds["model"].completion_tokens) == (50, 10)
    assert kinds["model"].cost == pytest.approx(0.005)
    assert kinds["tool"].latency_ms == pytest.approx(13 * 5.0)
    assert kinds["tool"].prompt_tokens is None


def test_a_run_without_steps_has_no_step_figures(dataset) -> None:
    assert run_summary(run=answered_run(dataset)).steps is None


def test_the_api_and_the_page_show_the_step_figures(victor_client, agent_run) -> None:
    body = victor_client.get(f"{API}/runs/{agent_run.pk}/summary").json()
    page = victor_client.get(reverse("runs:run_detail", args=[agent_run.pk]))

    assert body["steps"]["tool_calls"] == 13
    search = next(t for t in body["steps"]["tools"] if t["tool"] == "search")
    assert search["error_rate"] == 0.5
    assert 'id="step-summary"' in page.content.decode()

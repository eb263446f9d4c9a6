"""Failing results grouped by their first failed tool call and its masked error."""

from __future__ import annotations

import pytest

from runs.analysis.step_clusters import failing_step_clusters
from runs.results.services import run_create
from tests.factories import arithmetic_items, make_dataset, store_outcomes
from tests.trajectories.steps import model_step, result_of, store_steps, tool_step

API = "/api/v1"
PASSED = {"scores": [("exact_match", True, "")]}
FAILED = {"scores": [("exact_match", False, "wrong")]}
CRASHED = {"error": ("permanent", "ToolLoopError", "gave up")}


@pytest.fixture
def agent_run(project):
    run = run_create(
        user=None,
        dataset=make_dataset(project, arithmetic_items(6)),
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        launch=False,
    )
    run = store_outcomes(run, [FAILED, FAILED, CRASHED, FAILED, PASSED, FAILED])
    timeout = {"error": "timed out after 30 s (attempt 3)", "error_type": "Timeout"}
    plans = {
        0: [tool_step("fetch", {"u": 1}, **timeout)],
        # The same failure, other numbers: one cluster; the later error is not
        # this result's failing step.
        1: [
            tool_step("search"),
            tool_step("fetch", {"u": 2}, error="timed out after 12 s (attempt 1)",
                      error_type="Timeout"),
            tool_step("search", error="HTTP 500", error_type="ToolError"),
        ],
        2: [tool_step("search", error="HTTP 500", error_type="ToolError")],
        3: [model_step(), tool_step("search")],  # failed with no failed call
        4: [tool_step("fetch", error="HTTP 500", error_type="ToolError")],  # passed
    }  # fmt: skip
    for index, steps in plans.items():
        store_steps(result_of(run, index), steps)
    return run


def test_failing_results_cluster_by_their_first_failed_call(agent_run) -> None:
    found = failing_step_clusters(agent_run)

    assert (found.failing, found.without_failed_step) == (5, 2)
    shown = [(c.tool, c.error_type, c.pattern, c.results) for c in found.clusters]
    assert shown[0][:2] == ("fetch", "Timeout") and shown[0][3] == 2
    assert shown[1] == ("search", "ToolError", "HTTP <n>", 1)
    assert len(shown) == 2
    assert [example[0] for example in found.clusters[0].examples] == [0, 1]


def test_the_api_gives_the_clusters_and_refuses_an_outsider(
    victor_client, mallory_client, agent_run
) -> None:
    url = f"{API}/runs/{agent_run.pk}/failing-steps"

    body = victor_client.get(url).json()

    assert body["failing"] == 5
    assert body["clusters"][0]["tool"] == "fetch"
    assert mallory_client.get(url).status_code == 404

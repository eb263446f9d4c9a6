"""The analysis of steps on the pages: the clusters page groups failing
results by their failing step, and the comparison page tests steps and cost
per item, when the runs have trajectories."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes
from tests.trajectories.steps import model_step, result_of, store_steps, tool_step

PASSED = {"scores": [("exact_match", True, "")]}
FAILED = {"scores": [("exact_match", False, "wrong")]}


@pytest.fixture
def dataset(project):
    return make_dataset(project, arithmetic_items(4))


@pytest.fixture
def agent_run(dataset) -> Run:
    """Items 0 and 1 fail on a fetch timing out, 2 fails with no failed
    call, 3 passes."""
    run = store_outcomes(echo_run(dataset), [FAILED, FAILED, FAILED, PASSED])
    timeout = {"error_type": "Timeout"}
    store_steps(
        result_of(run, 0),
        [model_step(), tool_step("fetch", {"u": 1}, error="took 30 s", **timeout)],
    )
    store_steps(result_of(run, 1), [tool_step("fetch", error="took 12 s", **timeout)])
    store_steps(result_of(run, 2), [model_step(), tool_step("search")])
    store_steps(result_of(run, 3), [tool_step("search", {"q": "<b>x</b>"})])
    return run


def clusters_page(client: Client, run: Run) -> str:
    response = client.get(reverse("runs:run_clusters", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def compare_page(client: Client, baseline: Run, candidate: Run) -> str:
    response = client.get(
        reverse("runs:compare"),
        {"baseline": baseline.pk, "candidates": str(candidate.pk)},
    )
    assert response.status_code == 200
    return response.content.decode()


def test_the_clusters_page_groups_failing_results_by_their_failing_step(
    victor_client, agent_run
) -> None:
    page = clusters_page(victor_client, agent_run)

    assert 'id="step-clusters"' in page
    assert page.count('class="cluster step-cluster"') == 1
    assert '<code class="step-tool">fetch</code>' in page
    assert "<code>Timeout</code>" in page
    assert '<code class="cluster-pattern">took &lt;n&gt; s</code>' in page
    assert "The run's 3 failing results" in page
    assert '<span id="without-failed-step">1 of them' in page
    for index in (0, 1):
        result = result_of(agent_run, index)
        url = reverse("runs:result_detail", args=[agent_run.pk, result.pk])
        assert f'href="{url}#trajectory">item {index}</a>' in page


def test_a_run_without_steps_has_no_failing_step_section(
    victor_client, dataset
) -> None:
    run = store_outcomes(echo_run(dataset), [FAILED, PASSED, FAILED, PASSED])

    page = clusters_page(victor_client, run)

    assert 'id="error-clusters"' in page
    assert 'id="step-clusters"' not in page


def test_failing_results_without_a_failed_call_are_said_to_be(
    victor_client, dataset
) -> None:
    run = store_outcomes(echo_run(dataset), [FAILED, PASSED, PASSED, PASSED])
    store_steps(result_of(run, 0), [model_step(), tool_step("search")])

    page = clusters_page(victor_client, run)

    assert 'id="step-clusters"' in page
    assert "No failing result has a failed tool call." in page


def test_the_comparison_tests_steps_and_cost_per_item(
    victor_client, dataset, agent_run
) -> None:
    candidate = store_outcomes(echo_run(dataset), [PASSED] * 4)
    for index in range(4):
        store_steps(
            result_of(candidate, index),
            [model_step(cost=0.002), tool_step("search"), model_step(cost=0.001)],
        )

    page = compare_page(victor_client, agent_run, candidate)

    assert 'id="step-comparison"' in page
    steps = page.split(f'data-candidate="{candidate.pk}" data-measure="steps"')[1]
    steps = steps.split("</tr>")[0]
    # Baseline 2, 1, 2, 1 steps; the candidate 3 each: +1.50 on average.
    assert '<td class="num">1.50</td>' in steps
    assert '<td class="num">3.00</td>' in steps
    assert "+1.50" in steps
    # Each item's row still leads to the runs' trajectories side by side.
    assert page.count('class="small trajectory-diff-link"') == 4


def test_runs_without_steps_have_no_step_comparison(victor_client, dataset) -> None:
    runs = [store_outcomes(echo_run(dataset), [PASSED] * 4) for _ in range(2)]

    page = compare_page(victor_client, *runs)

    assert 'id="verdicts"' in page
    assert 'id="step-comparison"' not in page


def test_the_comparison_tests_steps_when_only_the_baseline_has_them(
    victor_client, dataset, agent_run
) -> None:
    candidate = store_outcomes(echo_run(dataset), [PASSED] * 4)

    page = compare_page(victor_client, agent_run, candidate)

    assert f'data-candidate="{candidate.pk}" data-measure="steps"' in page

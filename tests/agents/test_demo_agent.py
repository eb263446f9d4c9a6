"""The demo's agent tasks and its agent target, run against the fake model."""

from __future__ import annotations

import asyncio

import pytest

from runs.demo.seed import demo_seed
from runs.executor.engine import execute_run
from runs.models import Dataset, Result, RunStatus, Step, Target
from runs.results.services import run_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_demo_agent_answers_its_tasks_with_tools(agent_model, settings) -> None:
    seed = demo_seed()
    target = Target.objects.get(project=seed.project, kind="agent")
    dataset = Dataset.objects.get(project=seed.project, name="agent-tasks-20")
    config = {**target.config, "base_url": agent_model.base_url}

    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="agent",
        target_config=config,
        scorers=["exact_match"],
        launch=False,
    )
    assert asyncio.run(execute_run(run.pk)) == RunStatus.COMPLETED

    assert Result.objects.filter(run=run, scores__passed=True).count() == 20
    tools = Step.objects.filter(result__run=run, kind="tool")
    assert set(tools.values_list("name", flat=True)) == {
        "add",
        "lookup",
        "final_answer",
    }
    assert not tools.exclude(error="").exists()


def test_without_loopback_the_demo_has_no_agent_target(settings) -> None:
    settings.EVALSITE_TARGET_ALLOW = ["public"]

    seed = demo_seed()

    assert not Target.objects.filter(project=seed.project, kind="agent").exists()
    assert Dataset.objects.filter(name="agent-tasks-20").exists()

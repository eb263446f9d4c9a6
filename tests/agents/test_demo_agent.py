"""The demo's agent tasks: its offline demo agent, seeded with a finished run,
and its agent target against the fake model."""

from __future__ import annotations

import asyncio
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Count

from runs.demo.seed import DEMO_AGENT_RUN, demo_seed
from runs.executor.engine import execute_run
from runs.models import Dataset, Result, Run, RunStatus, Score, Step, Target
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


def test_seeding_the_demo_runs_its_agent_offline_with_every_step_kept(
    settings,
) -> None:
    settings.EVALSITE_TARGET_ALLOW = ["public"]  # nothing on this machine

    call_command("seed_demo", "--quiet", stdout=StringIO())

    run = Run.objects.get(name=DEMO_AGENT_RUN)
    assert (run.status, run.target_kind) == (RunStatus.COMPLETED, "demo_agent")
    assert run.succeeded == run.total == 20
    results = Result.objects.filter(run=run).annotate(n=Count("steps"))
    assert all(result.n >= 3 for result in results)
    assert (
        Score.objects.filter(result__run=run, scorer="exact_match", passed=True).count()
        == 20
    )
    tools = Step.objects.filter(result__run=run, kind="tool")
    assert set(tools.values_list("name", flat=True)) == {
        "add",
        "lookup",
        "final_answer",
    }
    # Seeded again: the run is kept, not made twice.
    call_command("seed_demo", "--quiet", stdout=StringIO())
    assert Run.objects.filter(name=DEMO_AGENT_RUN).count() == 1

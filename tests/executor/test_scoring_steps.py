"""Scorers that declare ``needs_steps`` get the trajectory: from the target's
answer in a run, and from the stored steps in a scoring pass."""

from __future__ import annotations

import asyncio

import pytest

from runs.executor.engine import execute_run
from runs.executor.rescore import execute_scoring_pass
from runs.models import Result, Score, Step
from runs.plugins.steps import Step as ReportedStep
from runs.plugins.steps import call_hash
from runs.plugins.targets import TargetInput, TargetOutput
from runs.rescore.services import run_rescore
from runs.results.services import run_create
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "tests.executor.test_scoring_steps.looping_agent"
LOOP = {"kind": "stuck_loop", "params": {"repeats": 3}}
SEARCHED = {"kind": "tool_called", "params": {"tool": "search"}}


def looping_agent(item: TargetInput) -> TargetOutput:
    """Searches once per item; item 1 gets stuck searching the same thing."""
    times = 3 if item.index == 1 else 1
    steps = [ReportedStep(kind="model", name="fake", arguments=[], output="")]
    steps += [
        ReportedStep(kind="tool", name="search", arguments={"q": "same"}, output="r")
        for _ in range(times)
    ]
    return TargetOutput(output=str(item.expected), steps=steps)


@pytest.fixture
def agent_run(project, settings):
    settings.EVALSITE_PYTHON_TARGETS = [AGENT]
    dataset = make_dataset(project, arithmetic_items(3))
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": AGENT},
        scorers=["exact_match", LOOP, SEARCHED],
        launch=False,
    )


def verdicts(run, scorer: str) -> dict[int, bool | None]:
    return dict(
        Score.objects.filter(result__run=run, scorer=scorer).values_list(
            "result__item_index", "passed"
        )
    )


def test_a_run_scores_the_steps_its_target_reported(agent_run) -> None:
    asyncio.run(execute_run(agent_run.pk))

    assert verdicts(agent_run, "stuck_loop") == {0: True, 1: False, 2: True}
    assert verdicts(agent_run, "tool_called") == {0: True, 1: True, 2: True}
    assert verdicts(agent_run, "exact_match") == {0: True, 1: True, 2: True}


def test_a_scoring_pass_reads_the_stored_steps(agent_run) -> None:
    asyncio.run(execute_run(agent_run.pk))
    result = Result.objects.get(run=agent_run, item_index=2)
    # Stored as a target would have them: now stuck on item 2 as well.
    Step.objects.filter(result__run=agent_run).delete()
    Step.objects.bulk_create(
        Step(
            result=result,
            index=n,
            kind="tool",
            name="search",
            arguments={"q": "again"},
            call_hash=call_hash("search", {"q": "again"}),
        )
        for n in range(4)
    )
    scorers = [{"kind": "stuck_loop", "name": "loop2", "params": {"repeats": 4}}]
    plan = run_rescore(run=agent_run, user=None, scorers=scorers, launch=False)
    assert plan.scoring_pass is not None

    asyncio.run(execute_scoring_pass(plan.scoring_pass.pk))

    # Results without stored steps have an empty trajectory: no loop.
    assert verdicts(agent_run, "loop2") == {0: True, 1: True, 2: False}
    reason = Score.objects.get(result=result, scorer="loop2").reason
    assert "the same call search" in reason


def test_the_judge_is_sent_the_trajectory(project, settings, fake_openai) -> None:
    settings.EVALSITE_PYTHON_TARGETS = [AGENT]
    judge = {
        "kind": "llm_judge",
        "params": {
            "base_url": fake_openai.base_url,
            "model": "judge",
            "prompt_template": "Answer: {output}\nSteps:\n{trajectory}\n{format}",
        },
    }
    run = run_create(
        user=None,
        dataset=make_dataset(project, arithmetic_items(2)),
        target_kind="python",
        target_config={"callable": AGENT},
        scorers=[judge],
        launch=False,
    )

    asyncio.run(execute_run(run.pk))

    prompts = [p for p in fake_openai.stats.prompts if "Steps:" in p]
    assert len(prompts) == 2
    stuck = next(p for p in prompts if "[3] tool search" in p)
    assert '[1] tool search({"q":"same"}) -> r' in stuck

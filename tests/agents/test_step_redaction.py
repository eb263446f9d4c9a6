"""A secret a tool or a model echoes into an agent's steps is stored, exported
and shown to a judge nowhere: every step payload is redacted with the run's
secrets before it is scored or stored."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from runs.executor.engine import execute_run
from runs.executor.items import ItemRunner
from runs.models import Project, Result, Run, RunStatus, Step
from runs.results.services import run_cancel, run_create
from runs.testing.fake_openai import FakeOpenAIServer
from runs.testing.key_forms import leaks
from tests.agents.conftest import FAST
from tests.executor.conftest import wait_for
from tests.factories import make_dataset
from tests.stored_texts import exported_text, store_secret, stored_text

pytestmark = pytest.mark.django_db(transaction=True)

MODEL_KEY = "sk-model-Vb4nQ8tZ2wX6cR1m"
TOOL_KEY = "tool-Kp9sL3dF7hJ2gA5e"
JUDGE_KEY = "sk-judge-Ye6uI1oP4aS8dG3h"
KEYS = (MODEL_KEY, TOOL_KEY, JUDGE_KEY)
TRAJECTORY = "Grade the answer {output}. Steps:\n{trajectory}\n{format}"


@pytest.fixture
def judge_model() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    yield server
    server.stop()


def hostile_agent_run(
    project: Project,
    user: User,
    model: FakeOpenAIServer,
    tool_url: str,
    judge: FakeOpenAIServer,
    items: list[dict[str, Any]],
) -> Run:
    """An agent whose model echoes its key (in the model's name) and whose
    one tool answers with its own key; judged from its trajectory."""
    store_secret(project, user, "MODEL", MODEL_KEY, url=model.base_url)
    store_secret(project, user, "TOOL", TOOL_KEY, url=tool_url)
    store_secret(project, user, "JUDGE", JUDGE_KEY, url=judge.base_url)
    tool = {
        "kind": "http",
        "name": "whoami",
        "params": {
            "url": tool_url + "/whoami",
            "body": {"q": "{query}"},
            "auth_secret": "TOOL",
        },
    }
    return run_create(
        user=user,
        dataset=make_dataset(project, items),
        target_kind="agent",
        target_config={
            "base_url": model.base_url,
            "model": "fake",
            "api_key_secret": "MODEL",
            "tools": [tool],
        },
        scorers=[
            {
                "kind": "llm_judge",
                "params": {
                    "base_url": judge.base_url,
                    "model": "fake-judge",
                    "api_key_secret": "JUDGE",
                    "prompt_template": TRAJECTORY,
                    "max_attempts": 1,
                },
            }
        ],
        options={"max_attempts": 1, **FAST},
        launch=False,
    )


def test_secrets_in_an_agents_steps_are_stored_exported_and_judged_nowhere(
    alice, project, agent_model, tool_url, seen, judge_model
) -> None:
    items = [{"id": "a", "input": "What is 2 + 3? [[echo_key:exact]]"}]
    run = hostile_agent_run(project, alice, agent_model, tool_url, judge_model, items)

    assert asyncio.run(execute_run(run.pk)) == RunStatus.COMPLETED

    # The model echoed its key, the tool answered with its own.
    assert agent_model.stats.authorization == {f"Bearer {MODEL_KEY}"}
    assert seen.authorization == {f"Bearer {TOOL_KEY}"}
    steps = Step.objects.filter(result__run=run).order_by("index")
    assert [s.kind for s in steps] == ["model", "tool", "model"]
    assert steps[0].name == "fake [redacted secret api_key]"
    assert steps[1].output == {"authorization": "Bearer [redacted secret tool:whoami]"}
    # The judge saw the trajectory, with every key replaced.
    judged = [p for p in judge_model.stats.prompts if "Steps:" in p]
    assert len(judged) == 1 and "[redacted secret tool:whoami]" in judged[0]
    for key in KEYS:
        assert leaks(stored_text(run), key) == []
        assert leaks(exported_text(run), key) == []
        assert leaks(judged[0], key) == []


def test_a_cancel_during_an_attempts_redaction_stores_its_steps_redacted(
    alice, project, agent_model, tool_url, judge_model, monkeypatch
) -> None:
    """Cut short while its attempt is being redacted (a long one, in a worker
    thread), the item is stored as cancelled with its steps: redacted."""
    items = [{"id": "a", "input": "What is 2 + 3? [[echo_key:exact]]"}]
    run = hostile_agent_run(project, alice, agent_model, tool_url, judge_model, items)
    started = asyncio.Event()

    async def redact_forever(*args: Any) -> None:
        started.set()
        await asyncio.Event().wait()  # cancelled here

    monkeypatch.setattr(ItemRunner, "redact_attempt", redact_forever)

    async def cancel_when_redacting() -> None:
        await started.wait()
        await asyncio.to_thread(run_cancel, run=run)

    async def both() -> str:
        status, _ = await asyncio.gather(execute_run(run.pk), cancel_when_redacting())
        return status

    assert asyncio.run(both()) == RunStatus.CANCELLED

    wait_for(lambda: Result.objects.filter(run=run).exists())
    assert Step.objects.filter(result__run=run).count() == 3
    for key in KEYS:
        assert leaks(stored_text(run), key) == []

"""Where bubblewrap cannot run, code_exec refuses: never a silent fallback."""

from __future__ import annotations

from typing import Any

import pytest

from runs import sandbox
from runs.results.services import run_create
from tests.sandboxes import CORRECT, PROMPT, TEST, score


@pytest.fixture
def no_bwrap(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("PATH", "/nonexistent")
    sandbox.reset()
    yield settings
    sandbox.reset()


@pytest.mark.parametrize("wanted", ["auto", "bubblewrap"])
async def test_without_bubblewrap_code_exec_refuses_saying_how_to_enable_it(
    no_bwrap: Any, wanted: str
):
    no_bwrap.EVALSITE_SANDBOX = wanted
    with pytest.raises(sandbox.SandboxUnavailable) as caught:
        await score(CORRECT)
    message = str(caught.value)
    assert "bubblewrap is not installed" in message
    assert "apt-get install bubblewrap" in message
    assert "kernel.unprivileged_userns_clone" in message
    assert "EVALSITE_SANDBOX=limits" in message


async def test_a_refusal_is_not_remembered_as_a_mode(no_bwrap: Any):
    no_bwrap.EVALSITE_SANDBOX = "auto"
    for _ in range(2):
        with pytest.raises(sandbox.SandboxUnavailable):
            await sandbox.mode()


@pytest.mark.django_db(transaction=True)
async def test_a_run_with_code_exec_fails_before_any_item_where_it_cannot_run(
    no_bwrap: Any, project: Any, fake_openai: Any
):
    from asgiref.sync import sync_to_async

    from runs.executor.engine import execute_run
    from runs.models import Result, RunStatus
    from tests.factories import make_dataset

    no_bwrap.EVALSITE_SANDBOX = "auto"
    items = [
        {"id": "a", "input": PROMPT, "metadata": {"test": TEST, "entry_point": "add"}}
    ]

    def create() -> Any:
        return run_create(
            user=None,
            dataset=make_dataset(project, items),
            target_kind="openai_chat",
            target_config={"base_url": fake_openai.base_url, "model": "fake"},
            scorers=["code_exec"],
            options={},
            launch=False,
        )

    run = await sync_to_async(create)()
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert "scorer 'code_exec': code execution is refused" in run.error
    assert "apt-get install bubblewrap" in run.error
    assert fake_openai.stats.requests == 0
    assert not await Result.objects.filter(run=run, status="succeeded").aexists()


@pytest.mark.django_db(transaction=True)
async def test_a_run_of_a_scorer_target_wrapping_code_exec_fails_before_any_item(
    no_bwrap: Any, project: Any
):
    from asgiref.sync import sync_to_async

    from runs.executor.engine import execute_run
    from runs.models import Result, RunStatus
    from tests.factories import make_dataset

    no_bwrap.EVALSITE_SANDBOX = "auto"
    metadata = {"test": TEST, "entry_point": "add"}
    items = [{"id": "a", "input": CORRECT, "expected": "1.0", "metadata": metadata}]

    def create() -> Any:
        return run_create(
            user=None,
            dataset=make_dataset(project, items),
            target_kind="scorer",
            target_config={"scorer_kind": "code_exec", "output": "value"},
            scorers=["exact_match"],
            options={},
            launch=False,
        )

    run = await sync_to_async(create)()
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert "scorer 'code_exec': code execution is refused" in run.error
    assert "apt-get install bubblewrap" in run.error
    assert not await Result.objects.filter(run=run).aexists()

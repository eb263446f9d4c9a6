"""Without bubblewrap: resource limits only, said in every score's reason."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runs import sandbox
from tests.sandboxes import (  # noqa: F401  (fixtures)
    CORRECT,
    item,
    limits_only,
    sandbox_processes,
    score,
    work_directories,
)

FORCED = "sandbox: resource limits only (forced by EVALSITE_SANDBOX=limits)"


@pytest.mark.usefixtures("limits_only")
async def test_a_correct_completion_passes_and_says_limits_only():
    outcome = await score(CORRECT)
    assert outcome.passed is True
    assert outcome.reason == f"check(add) passed; {FORCED}"


@pytest.mark.usefixtures("limits_only")
async def test_every_reason_says_limits_only():
    completions = [
        CORRECT,
        "    return a - b\n",
        CORRECT + "import os\nos._exit(0)\n",
        CORRECT + "while True:\n    pass\n",
        "",
    ]
    outcomes = await asyncio.gather(
        *(
            score(text, item(index=n), timeout_seconds=2)
            for n, text in enumerate(completions)
        )
    )
    assert [outcome.passed for outcome in outcomes] == [
        True,
        False,
        False,
        False,
        False,
    ]
    assert all(outcome.reason.endswith(FORCED) for outcome in outcomes)
    assert "AssertionError" in outcomes[1].reason
    assert "before its tests finished" in outcomes[2].reason
    assert "timed out after 2 s" in outcomes[3].reason


@pytest.mark.usefixtures("limits_only")
async def test_a_fork_bomb_is_bounded_without_bubblewrap():
    bomb = CORRECT + "import os\nwhile True:\n    os.fork()\n"
    outcome = await score(bomb, processes=16, timeout_seconds=20)
    assert outcome.passed is False
    assert "Resource temporarily unavailable" in outcome.reason
    assert sandbox_processes() == []


@pytest.mark.usefixtures("limits_only")
async def test_a_timeout_kills_children_that_left_the_session():
    escape = (
        CORRECT + "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        "time.sleep(120)\n"
    )
    outcome = await score(escape, timeout_seconds=1)
    assert outcome.passed is False
    assert "timed out" in outcome.reason
    if sandbox._as_root():  # as root, everything of the program's fresh uid
        assert sandbox_processes() == []


@pytest.mark.usefixtures("limits_only")
async def test_its_directory_is_empty_writable_and_removed_afterwards():
    use_dir = (
        CORRECT + "import os\n"
        "assert os.listdir('.') == [], os.listdir('.')\n"
        "open('scratch.txt', 'w').write('ok')\n"
    )
    outcome = await score(use_dir)
    assert outcome.passed is True, outcome.reason
    assert work_directories() == []


async def test_without_bubblewrap_on_the_path_it_falls_back(
    settings: Any, monkeypatch: pytest.MonkeyPatch
):
    settings.EVALSITE_SANDBOX = "auto"
    monkeypatch.setenv("PATH", "/nonexistent")
    sandbox.reset()
    try:
        outcome = await score(CORRECT)
    finally:
        sandbox.reset()
    assert outcome.passed is True
    assert outcome.reason == (
        "check(add) passed; sandbox: resource limits only (bubblewrap not available)"
    )


async def test_when_bubblewrap_is_required_its_absence_is_a_scorer_error(
    settings: Any, monkeypatch: pytest.MonkeyPatch
):
    settings.EVALSITE_SANDBOX = "bubblewrap"
    monkeypatch.setenv("PATH", "/nonexistent")
    sandbox.reset()
    try:
        with pytest.raises(sandbox.SandboxUnavailable, match="not available"):
            await score(CORRECT)
    finally:
        sandbox.reset()

"""Where bubblewrap cannot run, code_exec refuses: never a silent fallback."""

from __future__ import annotations

from typing import Any

import pytest

from runs import sandbox
from tests.sandboxes import CORRECT, score


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

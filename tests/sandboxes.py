"""Helpers for tests of the code-execution sandbox and the code_exec scorer."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runs import sandbox
from runs.datasets.importers import humaneval_content
from runs.scorers import ScoreOutcome, build_scorer, clean_scorer_specs
from runs.targets import TargetInput

PROMPT = 'def add(a, b):\n    """Return the sum of a and b."""\n'
TEST = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    assert candidate(-1, 1) == 0, 'negative numbers'\n"
)
CORRECT = "    return a + b\n"


def item(
    *,
    prompt: str = PROMPT,
    test: str = TEST,
    entry_point: str = "add",
    index: int = 0,
) -> TargetInput:
    return TargetInput(
        index=index,
        external_id=f"t{index}",
        input=prompt,
        metadata={"test": test, "entry_point": entry_point},
    )


async def score(
    output: Any, target_item: TargetInput | None = None, **params: Any
) -> ScoreOutcome:
    spec = clean_scorer_specs([{"kind": "code_exec", "params": params}])[0]
    return await build_scorer(spec).score(output=output, item=target_item or item())


def humaneval_items() -> list[TargetInput]:
    """The packaged HumanEval problems as the humaneval import format lays them out."""
    lines = humaneval_content().decode().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [
        TargetInput(
            index=index,
            external_id=record["task_id"],
            input=record["prompt"],
            expected=record["canonical_solution"],
            metadata={"test": record["test"], "entry_point": record["entry_point"]},
        )
        for index, record in enumerate(records)
    ]


def sandbox_processes() -> list[str]:
    """Processes of this test process's sandboxes still alive.

    A process is a sandbox's when the harness is on its command line, it is
    bubblewrap, or it runs as one of the fresh uids. It is this test
    process's unless it descends from another test process: ``make test``
    runs the SQLite and PostgreSQL passes at once, and the other pass's
    sandboxes (a fork bomb's hundreds of processes) are not a leak of this
    one's. A process left without a parent (re-parented to init) counts,
    whoever started it: nothing of a sandbox may outlive it.
    """
    table = _processes()
    found = []
    for pid, (parent, uid, cmdline, zombie) in table.items():
        if pid == os.getpid() or zombie:  # a zombie is dead, not yet reaped
            continue
        fresh_uid = sandbox.UID_RANGE[0] <= uid < sandbox.UID_RANGE[1]
        program = cmdline.split(b"\0")[0]
        sandboxed = b"RLIMIT_NPROC" in cmdline or program.endswith(b"bwrap")
        if (sandboxed or fresh_uid) and not _another_suites(parent, table):
            found.append(f"{pid}: {cmdline[:80]!r}")
    return found


def _processes() -> dict[int, tuple[int, int, bytes, bool]]:
    """Every process: its parent, uid, command line and whether it is a zombie."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            uid = os.stat(f"/proc/{name}").st_uid
            fields = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()
        except OSError:
            continue
        table[int(name)] = (int(fields[1]), uid, cmdline, fields[0] == b"Z")
    return table


def _another_suites(
    parent: int, table: dict[int, tuple[int, int, bytes, bool]]
) -> bool:
    """Whether an ancestor, before this test process or init, is another pytest."""
    seen: set[int] = set()
    while parent > 1 and parent not in seen and parent in table:
        if parent == os.getpid():
            return False
        seen.add(parent)
        grand, _, cmdline, _ = table[parent]
        if b"pytest" in cmdline:
            return True
        parent = grand
    return False


def work_directories() -> list[str]:
    return sorted(
        name
        for name in os.listdir(tempfile.gettempdir())
        if name.startswith("evalsite-sandbox-")
    )


@pytest.fixture
async def limits_only(settings: Any) -> AsyncIterator[None]:
    """The limits mode, chosen by the operator; it needs root (as in CI)."""
    settings.EVALSITE_SANDBOX = "limits"
    sandbox.reset()
    await _usable("the limits mode")
    yield
    sandbox.reset()


@pytest.fixture
async def bubblewrap(settings: Any) -> AsyncIterator[None]:
    """bubblewrap, which must work here; under CI=true its absence is a failure."""
    settings.EVALSITE_SANDBOX = "auto"
    sandbox.reset()
    await _usable("bubblewrap")
    yield
    sandbox.reset()


async def _usable(what: str) -> None:
    try:
        await sandbox.mode()
    except sandbox.SandboxUnavailable as exc:
        sandbox.reset()
        message = f"{what} cannot be used: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)

"""Every event loop evalsite makes itself is uvloop's (runs/pools/loops.py).

The server's loop is Daphne's; the loops of ``evalrun``, ``evalworker``, the
demo's run and ``LoopOwner`` (the launcher's, the alerts' sender's) are made
by ``loops.new_loop`` or ``loops.run``, which spend about a sixth less CPU an
HTTP item (bench/README.md, "CPU per item").
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import uvloop

from runs import sandbox
from runs.executor.launchers import LocalLauncher
from runs.pools import loops
from runs.pools.loops import LoopOwner, to_the_end
from runs.sandbox.outcome import Limits, Outcome, Program

RUNS = Path(__file__).resolve().parents[1] / "runs"
# The fake model server runs as its own program, on asyncio's loop.
OWN_LOOPS = {RUNS / "pools" / "loops.py", RUNS / "testing" / "fake_openai.py"}
MAKES_A_LOOP = re.compile(r"\basyncio\.(run|new_event_loop|Runner)\(")


async def running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


@pytest.fixture
def owner() -> Any:
    owned = LoopOwner("evalsite-test-owner", loops.new_asyncio_loop)
    yield owned
    loop = owned.loop
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)


def test_a_command_runs_on_uvloop() -> None:
    assert isinstance(loops.run(running_loop()), uvloop.Loop)


def test_the_launchers_own_loop_is_uvloop() -> None:
    launcher = LocalLauncher()
    loop = launcher._ensure_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
        ran = asyncio.run_coroutine_threadsafe(running_loop(), loop).result(30)
        assert ran is loop
    finally:
        loop.call_soon_threadsafe(loop.stop)


def test_no_module_makes_a_loop_of_its_own_kind() -> None:
    makers = [
        f"{path.relative_to(RUNS.parent)}:{number}"
        for path in sorted(RUNS.rglob("*.py"))
        if path not in OWN_LOOPS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if MAKES_A_LOOP.search(line)
    ]
    assert makers == [], "make loops with runs.pools.loops (new_loop, run)"


async def test_work_run_on_an_owners_loop_answers_and_raises_as_if_here(
    owner: LoopOwner,
) -> None:
    assert await owner.run_here(running_loop()) is owner.loop

    async def fails() -> None:
        raise ValueError("from the owner's loop")

    with pytest.raises(ValueError, match="from the owner's loop"):
        await owner.run_here(fails())


async def test_a_cancelled_caller_goes_on_once_the_work_has_ended(
    owner: LoopOwner,
) -> None:
    began = threading.Event()
    ended: list[str] = []

    async def work() -> None:
        began.set()
        try:
            await asyncio.sleep(60)
        finally:
            # An end that takes turns of its loop, as a killed tree's does.
            for _ in range(20):
                await asyncio.sleep(0)
            ended.append("cleaned up")

    caller = asyncio.create_task(owner.run_here(work()))
    assert await asyncio.to_thread(began.wait, 30)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert ended == ["cleaned up"]


def test_a_program_runs_confined_from_evalsites_own_loop(settings: Any) -> None:
    """uvloop cannot start a process as another user: the sandbox starts its
    programs on a loop of its own (asyncio's), whatever loop calls it."""
    settings.EVALSITE_SANDBOX = "auto"
    sandbox.reset()
    program = Program(
        candidate="def f():\n    return 1\n",
        tests="def check(candidate):\n    assert candidate() == 1\n",
        entry_point="f",
    )
    try:
        outcome = loops.run(sandbox.run_program(program, Limits(wall_seconds=20)))
    except sandbox.SandboxUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"bubblewrap cannot be used: {exc}")
        pytest.skip(f"bubblewrap cannot be used: {exc}")
    finally:
        sandbox.reset()
    assert outcome.passed, outcome.describe()


def test_a_system_exit_in_the_work_comes_back_and_the_loop_goes_on(
    owner: LoopOwner,
) -> None:
    async def exits() -> None:
        raise SystemExit(3)

    heard: list[object] = []

    def call() -> None:
        try:
            loops.run(owner.run_here(exits()))
        except SystemExit as exc:
            heard.append(exc.code)

    # In a thread of its own: a caller that never hears of it waits forever.
    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(30)
    assert heard == [3], "the caller never heard of the work's SystemExit"
    assert loops.run(owner.run_here(running_loop())) is owner.loop


async def test_to_the_end_finishes_the_work_then_passes_the_cancel_on() -> None:
    began = asyncio.Event()
    steps: list[str] = []

    async def clean_up() -> None:
        began.set()
        for _ in range(20):
            await asyncio.sleep(0)
        steps.append("cleaned up")

    caller = asyncio.create_task(to_the_end(clean_up()))
    await began.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert steps == ["cleaned up"]


def test_programs_are_started_on_the_sandboxs_own_asyncio_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As any user, not only root (where uvloop would refuse the uid)."""
    where: list[asyncio.AbstractEventLoop] = []

    async def run(program: Program, limits: Limits, current: Any) -> Outcome:
        where.append(asyncio.get_running_loop())
        return Outcome(mode=current.name, limits=limits)

    monkeypatch.setattr(sandbox, "_mode", sandbox.Mode("bubblewrap", "python3"))
    monkeypatch.setattr(sandbox, "_run", run)
    program = Program(candidate="", tests="", entry_point="f")
    loops.run(sandbox.run_program(program, Limits(wall_seconds=5)))
    assert len(where) == 1
    assert not isinstance(where[0], uvloop.Loop)
    assert where[0] is sandbox._PROGRAMS.loop

"""The local launcher says it is busy from the moment a launch returns.

A launch is queued on the launcher's loop; its task exists only once the loop
runs that callback. Whoever waits for the launcher to be idle (the test suite,
before it flushes the database) must count the queued launch, or it flushes
under a run that starts a moment later.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from runs.executor import launchers
from runs.executor.launchers import LocalLauncher
from tests.executor.conftest import wait_for


@pytest.fixture
def launcher() -> Iterator[LocalLauncher]:
    owned = LocalLauncher()
    yield owned
    loop = owned.loop
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)


def on_loop(launcher: LocalLauncher, work: Any) -> Any:
    """Run ``work`` on the launcher's loop and return what it returns."""
    loop = launcher.loop
    assert loop is not None

    async def call() -> Any:
        return work()

    return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout=30)


def blocked_loop(launcher: LocalLauncher) -> threading.Event:
    """Hold the launcher's loop in a callback until the returned event is set,
    as a loop busy with other runs' work would hold it."""
    loop = launcher._ensure_loop()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        release.wait(30)

    loop.call_soon_threadsafe(hold)
    assert holding.wait(30), "the launcher's loop never ran the holding callback"
    return release


@pytest.mark.parametrize("kind", ["run", "scoring pass"])
def test_a_launch_is_busy_before_its_task_exists_and_idle_after_it_ends(
    launcher: LocalLauncher, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    finish = asyncio.Event()

    async def executes(key: int, **_: Any) -> None:
        await finish.wait()

    monkeypatch.setattr(launchers, "execute_run", executes)
    monkeypatch.setattr(launchers, "execute_scoring_pass", executes)
    launch = launcher.launch if kind == "run" else launcher.launch_scoring_pass
    table = launcher.tasks if kind == "run" else launcher.passes

    release = blocked_loop(launcher)
    launch(7)
    # The loop has not run the launch yet: no task, but busy all the same.
    assert not table
    assert launcher.busy, "a queued launch was not counted: the launcher looked idle"
    release.set()

    assert on_loop(launcher, lambda: sorted(table)) == [7]
    assert launcher.busy
    on_loop(launcher, finish.set)
    wait_for(lambda: not launcher.busy)
    assert (table, launcher.starting) == ({}, 0)


def test_a_run_launched_twice_executes_once_and_leaves_no_launch_counted(
    launcher: LocalLauncher, monkeypatch: pytest.MonkeyPatch
) -> None:
    finish = asyncio.Event()
    started: list[int] = []

    async def executes(run_id: int, **_: Any) -> None:
        started.append(run_id)
        await finish.wait()

    monkeypatch.setattr(launchers, "execute_run", executes)
    launcher.launch(3)
    launcher.launch(3)
    assert on_loop(launcher, lambda: (sorted(launcher.tasks), launcher.starting)) == (
        [3],
        0,
    )
    wait_for(lambda: started == [3])
    on_loop(launcher, finish.set)
    wait_for(lambda: not launcher.busy)
    assert started == [3]


def test_a_launch_stays_counted_until_its_task_is_in_the_table(
    launcher: LocalLauncher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No moment between the queued launch and its task reads idle."""
    counted: list[int] = []
    start = LocalLauncher._start

    def counting(self: LocalLauncher, run_id: int) -> None:
        counted.append(self.starting)
        start(self, run_id)
        counted.append(self.starting)

    async def executes(run_id: int, **_: Any) -> None:
        pass

    monkeypatch.setattr(launchers, "execute_run", executes)
    monkeypatch.setattr(LocalLauncher, "_start", counting)
    launcher.launch(5)
    wait_for(lambda: not launcher.busy)
    # Still counted while the task is made, and once it is in the table.
    assert counted == [1, 1]


@pytest.mark.parametrize(
    ("kind", "said"), [("run", "run 7"), ("scoring pass", "scoring pass 7")]
)
def test_a_crashed_execution_is_logged_under_its_run_or_pass(
    launcher: LocalLauncher,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    said: str,
) -> None:
    # As every other line of the executor's log names them ("run 7: ..."),
    # so that a search for the run finds its crash.
    async def crashes(key: int, **_: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(launchers, "execute_run", crashes)
    monkeypatch.setattr(launchers, "execute_scoring_pass", crashes)
    launch = launcher.launch if kind == "run" else launcher.launch_scoring_pass

    with caplog.at_level("ERROR", logger=launchers.__name__):
        launch(7)
        wait_for(lambda: not launcher.busy)
        wait_for(lambda: bool(caplog.records))

    (record,) = caplog.records
    assert record.getMessage() == f"{said}: execution crashed: boom"
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError

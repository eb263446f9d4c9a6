"""Launchers start executions; the executor itself never knows which one did.

The local launcher runs executions as asyncio tasks in this process: on the
server's own event loop when the server has bound it, otherwise (management
commands, tests) on a private loop in a background thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError

from runs.executor import store
from runs.executor.engine import Execution, execute_run
from runs.executor.rescore import execute_scoring_pass
from runs.pools.loops import LoopOwner

logger = logging.getLogger(__name__)

REAP_INTERVAL = 5.0


class LocalLauncher(LoopOwner):
    def __init__(self) -> None:
        super().__init__("evalsite-executor")
        self.executions: dict[int, Execution] = {}
        self.tasks: dict[int, asyncio.Task[Any]] = {}
        self.reaper: asyncio.Task[None] | None = None
        self.passes: dict[int, asyncio.Task[Any]] = {}
        # Launches queued on the loop whose task does not exist yet.
        self.starting = 0

    # -- the loop ------------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop, *, resume: bool = True) -> None:
        """Run executions on the server's loop from now on; resume orphaned runs."""
        with self.lock:
            self.loop, self.thread = loop, None
        if resume:
            loop.call_soon_threadsafe(self._start_reaper)

    @property
    def busy(self) -> bool:
        """Whether a run or a scoring pass executes here, or was launched and
        is about to: a launch is queued on the loop before its task exists."""
        return bool(self.starting or self.tasks or self.passes)

    def _queue(self, start: Callable[[int], None], key: int) -> None:
        """Have the loop call ``start(key)``, counted in ``starting`` until
        ``start`` has put its task in the table."""
        loop = self._ensure_loop()
        with self.lock:
            self.starting += 1
        try:
            # A fresh context: the run must not inherit the caller's (a
            # request's thread-sensitive context would tie its database calls
            # to that request).
            loop.call_soon_threadsafe(
                self._begin, start, key, context=contextvars.Context()
            )
        except BaseException:
            self._started()  # never queued
            raise

    def _begin(self, start: Callable[[int], None], key: int) -> None:
        try:
            start(key)
        finally:
            self._started()  # once its task is in the table: never idle between

    def _started(self) -> None:
        with self.lock:
            self.starting -= 1

    # -- executions ------------------------------------------------------------

    def launch(self, run_id: int) -> None:
        self._queue(self._start, run_id)

    def _start(self, run_id: int) -> None:
        if run_id in self.tasks:
            return
        execution = execute_run(
            run_id, on_start=lambda ex: self.executions.__setitem__(run_id, ex)
        )
        task = self._hold(self.tasks, run_id, execution, what="run")
        task.add_done_callback(lambda _: self.executions.pop(run_id, None))

    def cancel(self, run_id: int) -> None:
        """Fast path for a run executing in this process; others see the flag."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._cancel, run_id)

    def _cancel(self, run_id: int) -> None:
        execution = self.executions.get(run_id)
        if execution is not None:
            execution.request_cancel()

    # -- scoring passes ------------------------------------------------------------

    def launch_scoring_pass(self, pass_id: int) -> None:
        self._queue(self._start_pass, pass_id)

    def _start_pass(self, pass_id: int) -> None:
        if pass_id in self.passes:
            return
        scoring = execute_scoring_pass(pass_id)
        self._hold(self.passes, pass_id, scoring, what="scoring pass")

    # -- the tasks' tables ---------------------------------------------------------

    @staticmethod
    def _hold(
        table: dict[int, asyncio.Task[Any]],
        key: int,
        work: Coroutine[Any, Any, Any],
        *,
        what: str,
    ) -> asyncio.Task[Any]:
        """Run ``work`` (of the ``what`` numbered ``key``: a run, a scoring
        pass) as a task, held in ``table`` under ``key`` until it ends; a crash
        is logged as the executor's other lines name it ("run 7: ...")."""
        name = f"{what.replace(' ', '-')}-{key}"
        task = asyncio.get_running_loop().create_task(work, name=name)
        table[key] = task

        def ended(task: asyncio.Task[Any]) -> None:
            table.pop(key, None)
            if not task.cancelled() and (exc := task.exception()) is not None:
                logger.error(
                    "%s %s: execution crashed: %s", what, key, exc, exc_info=exc
                )

        task.add_done_callback(ended)
        return task

    # -- orphans -----------------------------------------------------------------

    def _start_reaper(self) -> None:
        if self.reaper is None or self.reaper.done():
            self.reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        while True:
            with contextlib.suppress(DatabaseError):
                for run_id in await orphaned_runs():
                    if run_id not in self.tasks:
                        logger.info("run %s: resuming", run_id)
                        self._start(run_id)
            await asyncio.sleep(REAP_INTERVAL)


orphaned_runs = database_sync_to_async(store.orphaned_runs)


class Launcher(Protocol):
    """What services ask of a launcher, whichever executes the runs."""

    def launch(self, run_id: int) -> None: ...

    def cancel(self, run_id: int) -> None: ...

    def launch_scoring_pass(self, pass_id: int) -> None: ...


_launcher: LocalLauncher | None = None
_distributed: Launcher | None = None


def get_launcher() -> Launcher:
    """The launcher of ``EVALSITE_EXECUTOR``: local, or procrastinate's."""
    global _distributed
    if settings.EVALSITE_EXECUTOR == "procrastinate":
        if _distributed is None:
            from runs.executor.distributed import ProcrastinateLauncher

            _distributed = ProcrastinateLauncher()
        return _distributed
    return local_launcher()


def local_launcher() -> LocalLauncher:
    """The launcher of this process's own loop (``EVALSITE_EXECUTOR=local``)."""
    global _launcher
    if _launcher is None:
        _launcher = LocalLauncher()
    return _launcher

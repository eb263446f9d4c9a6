"""Workers as real subprocesses against the test database, for the tests of
the distributed mode: started, registered, killed, waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connection

from runs.models import Result, Run, RunShard

ROOT = Path(__file__).resolve().parent.parent.parent
SHARD_SIZE = 20
STALL_SECONDS = 3


def database_url(**overrides: Any) -> str:
    """This process's database, its host and port written as they are here
    (none filled in): a run's leases and live events in Redis are named after
    the database as written (``runs.records.installation``), and a worker
    that named it otherwise would share neither with this test."""
    db = {**connection.settings_dict, **overrides}
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return (
        f"postgres://{db['USER']}{password}@{db.get('HOST') or ''}{port}/{db['NAME']}"
    )


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a process of this test's installation, distributed."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DATABASE_URL=database_url(),
        EVALSITE_EXECUTOR="procrastinate",
        EVALSITE_SHARD_SIZE=str(SHARD_SIZE),
        EVALSITE_STALL_SECONDS=str(STALL_SECONDS),
        EVALSITE_WORKER_GRACE_SECONDS="5",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class Workers:
    """Worker subprocesses of one test, each logging to its own file."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self, count: int, *, env: dict[str, str] | None = None, shards: int = 1
    ) -> list[subprocess.Popen[bytes]]:
        started = []
        for _ in range(count):
            log = self.logs / f"worker-{len(self.processes)}.log"
            process = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "evalworker",
                    "-v",
                    "2",
                    "--shards",
                    str(shards),
                ],
                cwd=ROOT,
                env=env or worker_env(),
                stdout=log.open("wb"),
                stderr=subprocess.STDOUT,
            )
            self.processes.append(process)
            started.append(process)
        return started

    def wait_registered(self, count: int) -> None:
        """Until ``count`` workers are registered with procrastinate."""

        def registered() -> int:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM procrastinate_workers")
                return cursor.fetchone()[0]

        wait_for(lambda: registered() >= count, what=f"{count} workers registered")

    def start_registered(self, count: int) -> list[subprocess.Popen[bytes]]:
        """Start ``count`` workers and wait until procrastinate has them."""
        started = self.start(count)
        self.wait_registered(count)
        return started

    def kill_shard_holder(
        self, run: Run, *, stored: int = 4
    ) -> tuple[subprocess.Popen[bytes], RunShard]:
        """SIGKILL the worker holding a shard of ``run`` that is under way
        with at least ``stored`` results stored (half done, in the middle of
        its items): the killed process, and that shard as it was then."""

        def half_done() -> RunShard | None:
            for shard in RunShard.objects.filter(run=run, status="running"):
                done = Result.objects.filter(
                    run=run, item_index__gte=shard.start, item_index__lt=shard.stop
                ).count()
                if done >= stored:
                    return shard
            return None

        shard = wait_for(half_done, what="a shard half done")
        victim = next(p for p in self.processes if f":{p.pid}:" in shard.worker)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        return victim, shard

    def log(self, index: int) -> str:
        return (self.logs / f"worker-{index}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
        for process in self.processes:
            process.wait(10)


def wait_for(
    predicate: Callable[[], Any], *, seconds: float = 60.0, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {seconds:g} s")
        time.sleep(0.05)
    return value


def wait_final(run: Run, *, seconds: float = 60.0) -> Run:
    def final() -> bool:
        run.refresh_from_db()
        return run.is_final

    wait_for(final, seconds=seconds, what=f"run {run.pk} ended")
    return run

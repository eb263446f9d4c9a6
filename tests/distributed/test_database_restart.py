"""A database restart in the middle of a distributed run.

The database is a private PostgreSQL cluster that this test starts, stops and
starts again: never the server that other tests use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from procrastinate import App, PsycopgConnector

from runs.executor.distributed import recovery_pass
from runs.testing.fake_openai import FakeOpenAIServer
from tests.distributed.workers import (
    ROOT,
    SHARD_SIZE,
    Workers,
    database_url,
    wait_for,
    worker_env,
)
from tests.factories import arithmetic_items
from tests.processes import free_port


def postgresql_bin() -> Path:
    """The server's programs: Debian keeps them out of PATH, by version."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
    )
    return versions[-1] if versions else Path("/nonexistent")


PG_BIN = postgresql_bin()
# What a failure shows of each worker's log.
LOG_LINES = 200
# The test database is the one whose schema the private cluster copies.
pytestmark = pytest.mark.django_db(transaction=True)


class Cluster:
    """A PostgreSQL cluster of its own, run as the ``postgres`` user."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="evalsite-pg-"))
        self.port = free_port()
        self.data = self.dir / "data"
        shutil.chown(self.dir, "postgres")
        self.as_postgres(PG_BIN / "initdb", "-D", self.data, "-U", "postgres",
                         "--auth=trust", "-E", "UTF8")  # fmt: skip

    def as_postgres(self, *args: Any) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *map(str, args)],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        self.as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-w", "-l",
                         self.dir / "log", "-o",
                         f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1",
                         "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self.as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-w", "-m", mode, "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/evalsite"

    @property
    def conninfo(self) -> str:
        return self.url.replace("postgres://", "postgresql://")

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.conninfo) as conn:
            return conn.execute(sql).fetchall()

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0 or not (PG_BIN / "initdb").exists():
        reason = "a private PostgreSQL cluster needs root and PostgreSQL's initdb"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    own = Cluster()
    try:
        own.start()
        own.as_postgres("createdb", "-h", "127.0.0.1", "-p", own.port, "evalsite")
        yield own
    finally:
        own.remove()


def load_schema(cluster: Cluster) -> None:
    """The test database's schema (a copy: faster than migrating anew)."""
    schema = subprocess.run(
        [PG_BIN / "pg_dump", "--schema-only", "--no-owner", "-d", database_url()],
        capture_output=True,
        check=True,
    ).stdout
    # With the record of its migrations: a worker refuses an unmigrated database.
    schema += subprocess.run(
        [
            *(PG_BIN / "pg_dump", "--data-only", "--no-owner"),
            *("-t", "django_migrations", "-d", database_url()),
        ],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(
        [PG_BIN / "psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", cluster.url],
        input=schema,
        capture_output=True,
        check=True,
    )


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_run_completes_across_a_database_restart(
    cluster: Cluster, workers: Workers, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    env = worker_env(DATABASE_URL=cluster.url)
    load_schema(cluster)
    manage(env, "shell", "-c", "from django.contrib.auth import get_user_model; "
           "get_user_model().objects.create_user('researcher')")  # fmt: skip
    items = arithmetic_items(12 * SHARD_SIZE, marker="[[latency:200]]")
    data = tmp_path / "arith.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in items))
    workers.start(2, env=env)
    detached = manage(
        env,
        *("evalrun", str(data), "--detach", "--base-url", fake_openai.base_url),
        *("--model", "fake", "--scorer", "exact_match", "--concurrency", "4"),
        *("--storage-timeout-seconds", "60"),
    )
    run_id = int(detached.stdout.strip())  # --detach: the run id, at once

    def stored() -> set[int]:
        rows = cluster.query(
            f"SELECT item_index FROM runs_result WHERE run_id={run_id}"
        )
        return {index for (index,) in rows}

    def report() -> str:
        return run_report(cluster, run_id, workers)

    # Bounded waits that are generous: on a busy machine workers start and
    # items finish slowly, and what is tested is the outcome, not the speed.
    with reported(report):
        wait_for(
            lambda: len(stored()) >= 3 * SHARD_SIZE,
            seconds=180,
            what=f"{3 * SHARD_SIZE} results stored before the restart",
        )
    before = stored()
    cluster.stop()
    # The outage itself: how long the database is away is the scenario (a
    # short restart), not a stand-in for a state to wait on.
    time.sleep(3)
    cluster.start()
    # Two workers hold one shard each: most of the run is still to do, and
    # must be done after the restart.
    with reported(report):
        assert len(stored()) < len(items), "the run ended before the restart"

    def ended() -> str | None:
        try:
            rows = cluster.query(f"SELECT status FROM runs_run WHERE id={run_id}")
        except psycopg.OperationalError:
            return None
        ((status,),) = rows
        return status if status not in ("pending", "running") else None

    with reported(report):
        status = wait_for(ended, seconds=300, what="the run ended")
        assert status == "completed"
        after = stored()
        assert before <= after  # nothing reported done is lost
        assert len(after) == len(items)
        ((results, distinct, succeeded),) = cluster.query(
            "SELECT count(*), count(DISTINCT item_id), "
            f"(SELECT succeeded FROM runs_run WHERE id={run_id}) "
            f"FROM runs_result WHERE run_id={run_id}"
        )
        assert results == distinct == succeeded == len(items)


@contextlib.contextmanager
def reported(report: Callable[[], str]) -> Iterator[None]:
    """A failed assertion, or a wait that ran out, says what the run came to."""
    try:
        yield
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{report()}") from exc


def run_report(cluster: Cluster, run_id: int, workers: Workers) -> str:
    """What went wrong: the run's status, error and counts, its shards, and
    what the workers logged."""
    ((status, error, total, succeeded, failed, timed_out, cancelled),) = cluster.query(
        "SELECT status, error, total, succeeded, failed, timed_out, cancelled "
        f"FROM runs_run WHERE id={run_id}"
    )
    shards = cluster.query(
        "SELECT id, start, stop, status, worker, claims FROM runs_runshard "
        f"WHERE run_id={run_id} ORDER BY start"
    )
    logs = "\n".join(
        f"--- worker {i}, its last {LOG_LINES} lines ---\n"
        + "\n".join(workers.log(i).splitlines()[-LOG_LINES:])
        for i in range(len(workers.processes))
    )
    return (
        f"run {run_id} is {status}: {error!r}\n"
        f"total {total}, succeeded {succeeded}, failed {failed}, "
        f"timed out {timed_out}, cancelled {cancelled}\n"
        f"shards (id, start, stop, status, worker, claims): {shards}\n{logs}"
    )


def worker_with_a_job(cluster: Cluster, *, silent_for: float) -> tuple[int, int]:
    """A procrastinate worker silent for ``silent_for`` seconds, and the shard
    job it is executing; returns their ids."""
    ((worker,),) = cluster.query(
        "INSERT INTO procrastinate_workers (last_heartbeat) VALUES "
        f"(now() - interval '{silent_for} seconds') RETURNING id"
    )
    ((job,),) = cluster.query(
        "INSERT INTO procrastinate_jobs (queue_name, task_name, args, status, "
        f"worker_id) VALUES ('{settings.EVALSITE_QUEUE}', 'evalsite.execute_shard', "
        f"'{{}}', 'doing', {worker}) RETURNING id"
    )
    return worker, job


def recovery_pass_on(cluster: Cluster, *, stall_seconds: float) -> bool:
    """One pass of a worker's stalled-job recovery, on the private cluster."""

    async def one_pass() -> bool:
        worker_app = App(connector=PsycopgConnector(conninfo=cluster.conninfo))
        async with worker_app.open_async():
            return await recovery_pass(worker_app, stall_seconds=stall_seconds)

    return asyncio.run(one_pass())


def test_a_database_restart_does_not_make_live_workers_look_stalled(
    cluster: Cluster,
) -> None:
    load_schema(cluster)
    # A worker that beat until the database stopped: once it is back, its last
    # heartbeat is older than the stall period (the outage was long, or the
    # worker is slow to reconnect), yet it is alive and executing its job.
    stall = 30.0
    worker, job = worker_with_a_job(cluster, silent_for=2 * stall)
    cluster.stop()
    cluster.start()
    recovery_pass_on(cluster, stall_seconds=stall)
    assert cluster.query(f"SELECT status, worker_id FROM procrastinate_jobs "
                         f"WHERE id={job}") == [("doing", worker)]  # fmt: skip
    assert cluster.query(f"SELECT id FROM procrastinate_workers WHERE id={worker}")


def test_the_job_of_a_silent_worker_is_retried_once_the_database_has_been_up(
    cluster: Cluster,
) -> None:
    load_schema(cluster)
    stall = 1.0
    worker, job = worker_with_a_job(cluster, silent_for=2 * stall)

    def database_up_a_stall_period() -> bool:
        ((uptime,),) = cluster.query(
            "SELECT clock_timestamp() - pg_postmaster_start_time() "
            f">= interval '{stall} seconds'"
        )
        return uptime

    wait_for(database_up_a_stall_period, what="the database up for a stall period")
    assert recovery_pass_on(cluster, stall_seconds=stall)
    assert cluster.query(f"SELECT status FROM procrastinate_jobs WHERE id={job}") == [
        ("todo",)
    ]
    assert not cluster.query(f"SELECT id FROM procrastinate_workers WHERE id={worker}")

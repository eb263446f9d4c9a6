"""A database restart in the middle of a distributed run.

The database is a private PostgreSQL cluster that this test starts, stops and
starts again: never the server that other tests use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runs.testing.fake_openai import FakeOpenAIServer
from tests.distributed.conftest import (
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

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url.replace("postgres://", "postgresql://")) as conn:
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
    # The test database's schema (a copy: faster than migrating anew).
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

    wait_for(lambda: len(stored()) >= 3 * SHARD_SIZE, what="some results stored")
    before = stored()
    cluster.stop()
    time.sleep(3)
    cluster.start()

    def ended() -> str | None:
        try:
            (status,) = cluster.query(f"SELECT status FROM runs_run WHERE id={run_id}")[
                0
            ]
        except psycopg.OperationalError:
            return None
        return status if status not in ("pending", "running") else None

    assert wait_for(ended, seconds=90, what="the run ended") == "completed"
    after = stored()
    assert before <= after  # nothing reported done is lost
    assert len(after) == len(items)
    ((results, distinct, succeeded),) = cluster.query(
        "SELECT count(*), count(DISTINCT item_id), "
        f"(SELECT succeeded FROM runs_run WHERE id={run_id}) "
        f"FROM runs_result WHERE run_id={run_id}"
    )
    assert results == distinct == succeeded == len(items)

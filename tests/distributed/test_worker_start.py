"""A worker that cannot work says why at once, instead of retrying."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.distributed.workers import ROOT, database_url, worker_env
from tests.processes import free_port


def start_worker(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "evalworker"],
        cwd=ROOT,
        env=worker_env(DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def empty_database() -> Iterator[str]:
    name = f"evalsite_empty_{uuid.uuid4().hex[:8]}"
    server = database_url(NAME="postgres")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(NAME=name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.django_db
def test_a_worker_on_an_unmigrated_database_says_to_migrate(
    empty_database: str,
) -> None:
    done = start_worker(empty_database)

    assert done.returncode == 1
    assert "is not migrated" in done.stderr
    assert "manage.py migrate" in done.stderr


@pytest.mark.django_db
def test_a_worker_whose_database_does_not_answer_says_so() -> None:
    port = free_port()  # nothing listens there

    done = start_worker(database_url(PORT=port))

    assert done.returncode == 1
    assert f":{port}/" in done.stderr and "does not answer" in done.stderr
    assert "Traceback" not in done.stderr

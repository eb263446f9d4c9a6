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


def start_worker(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    # The limit only stops a hung test: a worker's start on a machine shared
    # with other work can take many times its quiet CPU time.
    return subprocess.run(
        [sys.executable, "manage.py", "evalworker"],
        cwd=ROOT,
        env=worker_env(DATABASE_URL=url, **env),
        capture_output=True,
        text=True,
        timeout=600,
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
def test_a_worker_starts_without_the_pages_or_the_api(empty_database: str) -> None:
    """A worker serves no page: Django's system checks, which import the URL
    configuration (every API schema, scipy with the comparisons), are not
    run at its start."""
    done = start_worker(empty_database, PYTHONPROFILEIMPORTTIME="1")

    assert "is not migrated" in done.stderr
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "django.core.management" in imported  # the profile was written
    assert not {"evalsite.urls", "runs.api", "ninja", "scipy.stats"} & imported


@pytest.mark.django_db
def test_a_worker_whose_database_does_not_answer_says_so() -> None:
    port = free_port()  # nothing listens there

    done = start_worker(database_url(PORT=port))

    assert done.returncode == 1
    assert f":{port}/" in done.stderr and "does not answer" in done.stderr
    assert "Traceback" not in done.stderr

"""The database connection that DATABASE_URL configures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT


def _shell(
    tmp_path: Path, database_url: str, code: str, *, timeout: float, **env_vars: str
) -> subprocess.CompletedProcess[str]:
    """``manage.py shell -c code`` with this database URL and a data
    directory of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(EVALSITE_DATA_DIR=str(tmp_path), DATABASE_URL=database_url, **env_vars)
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_connection_the_server_never_answers_fails_instead_of_hanging(
    tmp_path: Path,
) -> None:
    # A server that takes the connection and never says a word, as PostgreSQL
    # does with one that arrives while it shuts down.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        done = _shell(
            tmp_path,
            f"postgres://postgres@127.0.0.1:{port}/evalsite",
            "from django.db import connection; connection.ensure_connection()",
            # Bounded: without a connect timeout the attempt never ends.
            timeout=90,
        )
    assert done.returncode != 0
    assert "OperationalError" in done.stderr
    assert "timeout" in done.stderr


def _database_options(tmp_path: Path, **env_vars: str) -> str:
    done = _shell(
        tmp_path,
        "postgres://postgres@127.0.0.1:5432/evalsite",
        "from django.conf import settings;"
        " print(settings.DATABASES['default']['OPTIONS'])",
        timeout=120,
        **env_vars,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_postgresql_connections_prepare_the_hot_reads_unless_told_not_to(
    tmp_path: Path,
) -> None:
    # A pooler in transaction mode (PgBouncer before 1.21) cannot keep a
    # statement prepared on one connection for the next transaction.
    assert "'prepare_threshold': 5" in _database_options(tmp_path)
    off = _database_options(tmp_path, EVALSITE_DB_PREPARED="false")
    assert "'prepare_threshold': None" in off

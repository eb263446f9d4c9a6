"""The database connection that DATABASE_URL configures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT


def test_a_connection_the_server_never_answers_fails_instead_of_hanging(
    tmp_path: Path,
) -> None:
    # A server that takes the connection and never says a word, as PostgreSQL
    # does with one that arrives while it shuts down.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
        }
        env.update(
            EVALSITE_DATA_DIR=str(tmp_path),
            DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/evalsite",
        )
        done = subprocess.run(
            [
                *(sys.executable, "manage.py", "shell", "-c"),
                "from django.db import connection; connection.ensure_connection()",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            # Bounded: without a connect timeout the attempt never ends.
            timeout=90,
        )
    assert done.returncode != 0
    assert "OperationalError" in done.stderr
    assert "timeout" in done.stderr


def _database_options(tmp_path: Path, **env_vars: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        EVALSITE_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/evalsite",
        **env_vars,
    )
    done = subprocess.run(
        [
            *(sys.executable, "manage.py", "shell", "-c"),
            "from django.conf import settings;"
            " print(settings.DATABASES['default']['OPTIONS'])",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
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

"""Helpers for tests that run evalsite in separate processes on a SQLite file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def migrated_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory every migration was run in, once: the templates of
    the tests' data directories and of the browser tests' site start from
    copies of it."""
    data_dir = tmp_path_factory.mktemp("migrated") / "data"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env_for(data_dir),
        check=True,
    )
    return data_dir


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory: pytest.TempPathFactory, migrated_site: Path) -> Path:
    data_dir = tmp_path_factory.mktemp("template")
    shutil.copy(migrated_site / "evalsite.sqlite3", data_dir / "evalsite.sqlite3")
    # The command line acts as a user: the only one, unless --user names one.
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "get_user_model().objects.create_user('researcher')",
        ],
        cwd=ROOT,
        env=env_for(data_dir),
        check=True,
    )
    return data_dir / "evalsite.sqlite3"


@pytest.fixture
def data_dir(tmp_path: Path, migrated_db: Path) -> Iterator[Path]:
    shutil.copy(migrated_db, tmp_path / "evalsite.sqlite3")
    yield tmp_path


def env_for(data_dir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")
    }
    env["EVALSITE_DATA_DIR"] = str(data_dir)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

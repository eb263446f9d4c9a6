"""EVALSITE_EXECUTOR=procrastinate refuses what it cannot work with, by name."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import ROOT


def settings_error(tmp_path: object, **env: str) -> str:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**base, "EVALSITE_DATA_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    return done.stderr.strip().splitlines()[-1]


def test_distributed_mode_needs_postgresql(tmp_path: object) -> None:
    error = settings_error(
        tmp_path, EVALSITE_EXECUTOR="procrastinate", REDIS_URL="redis://127.0.0.1/0"
    )
    assert "ImproperlyConfigured" in error
    assert "DATABASE_URL" in error and "PostgreSQL" in error


def test_distributed_mode_needs_redis(tmp_path: object) -> None:
    error = settings_error(
        tmp_path,
        EVALSITE_EXECUTOR="procrastinate",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/evalsite",
    )
    assert "REDIS_URL" in error


def test_shard_size_is_bounded(tmp_path: object) -> None:
    error = settings_error(tmp_path, EVALSITE_SHARD_SIZE="5")
    assert "EVALSITE_SHARD_SIZE must be at least 10" in error

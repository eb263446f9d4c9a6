from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import ROOT, env_for

pytestmark = pytest.mark.own_sqlite

SHOW = (
    "from django.conf import settings; from django.core import checks; "
    "print(settings.EVALSITE_TRIES_AT_ONCE); "
    "print([m.msg for m in checks.run_checks()])"
)


def _django(data_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = env_for(data_dir)
    for name in ("EVALSITE_TRIES_AT_ONCE", "EVALSITE_TRY_CONCURRENCY"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHOW],
        cwd=ROOT,
        env=env | extra,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_former_name_of_tries_at_once_is_still_read_and_named(
    tmp_path: Path,
) -> None:
    shown = _django(tmp_path, EVALSITE_TRY_CONCURRENCY="5")
    assert shown.returncode == 0, shown.stderr
    value, messages = shown.stdout.strip().splitlines()[-2:]
    assert value == "5"
    assert "EVALSITE_TRY_CONCURRENCY is now EVALSITE_TRIES_AT_ONCE" in messages


def test_the_new_name_is_read_without_a_warning(tmp_path: Path) -> None:
    shown = _django(tmp_path, EVALSITE_TRIES_AT_ONCE="3")
    assert shown.returncode == 0, shown.stderr
    value, messages = shown.stdout.strip().splitlines()[-2:]
    assert value == "3"
    assert "TRIES_AT_ONCE" not in messages

"""The data directory and what it holds are readable by their owner only.

Each test starts evalsite's settings in a process of its own on a data
directory of its own, as a fresh or an upgraded installation would.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import ROOT, env_for

pytestmark = pytest.mark.own_sqlite

KEY_FILES = ("secret_key", "secrets_key")
# Starts the settings and Django's apps, as any command does, and runs no
# check (database checks need --database): what makes a data directory whose
# modes a test then changes. The checks whose output a test reads run whole.
START = ("check", "--tag", "database")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def manage(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = env_for(data_dir)
    for name in ("EVALSITE_SECRET_KEY", "EVALSITE_SECRETS_KEY"):
        env.pop(name, None)  # the keys are the data directory's own
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_fresh_data_directory_is_owner_only(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    # A umask that would leave everything open to everyone.
    old = os.umask(0)
    try:
        manage(data_dir, "migrate", "--no-input", "-v", "0")
    finally:
        os.umask(old)

    assert mode(data_dir) == 0o700
    assert mode(data_dir / "evalsite.sqlite3") == 0o600
    for name in KEY_FILES:
        assert mode(data_dir / name) == 0o600
    assert (data_dir / "evalsite.sqlite3").stat().st_size > 0  # migrated


def test_sqlite_gives_its_log_files_the_database_files_mode(tmp_path: Path) -> None:
    manage(tmp_path, *START)
    old = os.umask(0)
    try:
        db = sqlite3.connect(tmp_path / "evalsite.sqlite3")
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE t (x)")
            db.commit()
            wal = tmp_path / "evalsite.sqlite3-wal"
            shm = tmp_path / "evalsite.sqlite3-shm"
            assert (mode(wal), mode(shm)) == (0o600, 0o600)
        finally:
            db.close()
    finally:
        os.umask(old)


def test_an_open_data_directory_is_tightened_and_said_so(tmp_path: Path) -> None:
    manage(tmp_path, *START)
    opened = [tmp_path / "evalsite.sqlite3", *(tmp_path / n for n in KEY_FILES)]
    tmp_path.chmod(0o755)
    for path in opened:
        path.chmod(0o644)

    done = manage(tmp_path, "check")

    assert mode(tmp_path) == 0o700
    assert {path.name: mode(path) for path in opened} == {
        path.name: 0o600 for path in opened
    }
    assert f"{tmp_path} was open to other accounts (mode 0755): now 0700" in (
        done.stderr
    )
    # Once tightened, nothing more to say.
    assert "open to other accounts" not in manage(tmp_path, "check").stderr


def test_a_data_directory_of_another_account_is_left_with_a_warning(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another account needs root")
    manage(tmp_path, *START)
    tmp_path.chmod(0o755)
    os.chown(tmp_path, 65534, 65534)  # nobody

    done = manage(tmp_path, "check")

    assert mode(tmp_path) == 0o755
    assert f"{tmp_path} is open to other accounts (mode 0755) and not this" in (
        done.stderr
    )


def test_a_shared_scratch_directory_is_never_taken_over(tmp_path: Path) -> None:
    """EVALSITE_DATA_DIR=/tmp, say: the server warns and leaves it as it is."""
    shared = tmp_path / "scratch"
    shared.mkdir()
    shared.chmod(0o1777)

    done = manage(shared, "check")

    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert f"{shared} is open to other accounts (mode 1777) and not this" in (
        done.stderr
    )
    assert mode(shared / "evalsite.sqlite3") == 0o600

"""scripts/test.sh, the script behind `make test`, and the test database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import execnet
import pytest

from evalsite.databases import checkout_test_database
from tests.conftest import pytest_xdist_setupnodes, worker_redis_url
from tests.processes import ROOT

# Stands in for pytest: says which pass it is, then waits until the test has
# read that line (or gives up), as a long suite keeps running after printing.
FAKE_PYTEST = """#!/bin/sh
pass=${DATABASE_URL:+postgres}
echo "tests/test_one.py . ${pass:-sqlite}"
i=0
while [ ! -e "$RELEASE_DIR/${pass:-sqlite}" ]; do
    i=$((i + 1))
    [ "$i" -gt 600 ] && exit 1
    sleep 0.1
done
echo "1 passed"
"""


def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    for tool in ("ruff", "mypy", "chromium", "bwrap"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "pytest").write_text(FAKE_PYTEST)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


@contextmanager
def services_answering(bin_dir: Path) -> Iterator[dict[str, str]]:
    """An environment for scripts/test.sh with the tools of ``bin_dir``, in
    which PostgreSQL and Redis "answer" (a socket listens on their port), and
    no choice of the developer's (serial passes, workers) is inherited."""
    with socket.socket() as services:
        services.bind(("127.0.0.1", 0))
        services.listen()
        port = str(services.getsockname()[1])
        chosen = ("EVALSITE_TEST_SERIAL", "EVALSITE_TEST_WORKERS")
        yield {
            **{k: v for k, v in os.environ.items() if k not in chosen},
            "BIN": str(bin_dir),
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PG_PORT": port,
            "REDIS_PORT": port,
        }


def test_make_test_shows_each_pass_by_name_while_it_runs(tmp_path: Path) -> None:
    bin_dir = fake_bin(tmp_path)
    release = tmp_path / "release"
    release.mkdir()
    with services_answering(bin_dir) as env:
        env["RELEASE_DIR"] = str(release)
        script = subprocess.Popen(
            ["scripts/test.sh"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert script.stdout is not None
        seen = []
        # Each pass's first line arrives while that pass still runs: only
        # then is it told to finish.
        for line in script.stdout:
            seen.append(line.rstrip("\n"))
            for name in ("sqlite", "postgres"):
                if line.startswith(f"[{name}") and f". {name}" in line:
                    (release / name).touch()
            if len(list(release.iterdir())) == 2:
                break
        rest = script.stdout.read().splitlines()
        script.wait(timeout=60)

    assert script.returncode == 0, seen + rest
    assert "[sqlite]   tests/test_one.py . sqlite" in seen
    assert "[postgres] tests/test_one.py . postgres" in seen
    assert {"[sqlite]   1 passed", "[postgres] 1 passed"} <= {*seen, *rest}


def test_each_checkout_tests_on_a_postgresql_database_of_its_own() -> None:
    one = checkout_test_database("evalsite", Path("/srv/one/evalsite"))
    other = checkout_test_database("evalsite", Path("/srv/other/evalsite"))

    assert one != other
    assert one == checkout_test_database("evalsite", Path("/srv/one/evalsite"))
    assert one.startswith("test_evalsite_")
    assert len(checkout_test_database("x" * 63, Path("/srv/one"))) <= 63


def _test_database_name(data_dir: Path, **env: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; "
            "print(settings.DATABASES['default']['TEST']['NAME'])",
        ],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("EVALSITE_")},
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
            "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/evalsite",
            "EVALSITE_DATA_DIR": str(data_dir),
            **env,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_the_postgresql_test_database_is_this_checkouts(tmp_path: Path) -> None:
    named = _test_database_name(tmp_path)
    chosen = _test_database_name(tmp_path, EVALSITE_TEST_DATABASE="test_mine")

    assert named == checkout_test_database("evalsite", ROOT)
    assert chosen == "test_mine"


def test_the_postgres_pass_leaves_out_only_tests_of_their_own_sqlite() -> None:
    """A browser test (its server on a SQLite file of its own), a test marked
    own_sqlite and one marked no_database are left out of the PostgreSQL pass;
    a test of the pass's database is not."""
    env = {**os.environ, "EVALSITE_TEST_PASS": "postgres"}
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_browser_compare.py",
            "tests/test_collector.py",
            "tests/test_api_runs.py::test_results_filter_by_status",
            "tests/sandbox/test_hostile.py::test_sys_exit_before_the_tests_fails",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )

    out = collected.stdout
    kept = out.split("\n\n")[0]
    assert "test_api_runs.py::test_results_filter_by_status" in kept, out
    assert "test_browser_compare.py" not in kept, out
    assert "test_collector.py::test_a_command_runs_with_the_collector_on" not in kept
    assert "test_collector.py::test_a_collector_turned_off" in kept, out
    assert "test_hostile.py" not in kept, out
    assert "3 deselected" in out, out
    assert "1 tests that use no database ran in the SQLite pass" in out, out


def test_each_xdist_worker_has_a_redis_database_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/3")
    specs = [execnet.XSpec("popen"), execnet.XSpec("popen")]
    specs[0].id, specs[1].id = "gw0", "gw1"

    pytest_xdist_setupnodes(None, specs)

    assert [spec.env["REDIS_URL"] for spec in specs] == [
        "redis://127.0.0.1:6379/3",
        "redis://127.0.0.1:6379/4",
    ]
    assert worker_redis_url("redis://:secret@redis.example:6380", 2) == (
        "redis://:secret@redis.example:6380/2"
    )


@pytest.mark.own_sqlite  # its pytest runs without DATABASE_URL, whatever the pass
def test_the_count_left_out_is_said_once_over_several_workers() -> None:
    """Under pytest-xdist the workers collect and leave tests out; the summary,
    which the controller prints, still says how many, once."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("PYTEST_XDIST")
    }
    env["EVALSITE_TEST_PASS"] = "postgres"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            "tests/test_browser_compare.py",
            "tests/test_test_script.py::test_each_checkout_tests_on_a_postgresql_database_of_its_own",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )

    out = done.stdout
    assert done.returncode == 0, out
    left_out = [line for line in out.splitlines() if "were left out" in line]
    assert left_out == [
        "1 tests that run their programs on a SQLite database of their own ran "
        "in the SQLite pass and were left out of this one"
    ], out


def test_each_pass_runs_over_workers_and_takes_the_developers_arguments(
    tmp_path: Path,
) -> None:
    bin_dir = fake_bin(tmp_path)
    (bin_dir / "pytest").write_text('#!/bin/sh\necho "pytest $*"\n')
    with services_answering(bin_dir) as env:
        env["EVALSITE_TEST_SERIAL"] = "true"
        default, chosen = (
            subprocess.run(
                ["scripts/test.sh", "-x", "tests/test_one.py"],
                cwd=ROOT,
                env=env | more,
                capture_output=True,
                text=True,
                timeout=60,
            )
            for more in ({}, {"EVALSITE_TEST_WORKERS": "0"})
        )

    ran = [line for line in default.stdout.splitlines() if line.startswith("pytest")]
    assert ran == ["pytest -n 2 -x tests/test_one.py"] * 2, default.stdout
    ran = [line for line in chosen.stdout.splitlines() if line.startswith("pytest")]
    assert ran == ["pytest -n 0 -x tests/test_one.py"] * 2, chosen.stdout

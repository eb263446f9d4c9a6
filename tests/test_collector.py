"""manage.py holds the cyclic collector off while the apps load, and only then."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from evalsite.collector import collector_release
from tests.processes import ROOT, env_for


@pytest.mark.own_sqlite
def test_a_command_runs_with_the_collector_on(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "import gc; print(gc.isenabled())",
        ],
        cwd=ROOT,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "True"


def test_a_collector_turned_off_by_its_process_stays_off():
    gc.disable()
    try:
        collector_release()  # as the app's ready() does

        assert not gc.isenabled()
    finally:
        gc.enable()

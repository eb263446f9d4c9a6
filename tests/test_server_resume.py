"""The embedded server resumes, on start, the runs a dead process left running."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

from tests.processes import ROOT, env_for, free_port

SETUP = """
from django.utils import timezone
from runs.results import services
from runs.executor.store import HOSTNAME
from runs.models import Project, Run
from tests.factories import arithmetic_items, make_dataset
project = Project.objects.create(name="P")
run = services.run_create(
    user=None, dataset=make_dataset(project, arithmetic_items(12)), target_kind="demo",
    target_config={"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 0},
    scorers=["exact_match"], launch=False,
)
# As a process that was killed mid-run leaves it: running, fresh heartbeat.
Run.objects.filter(pk=run.pk).update(
    status="running", executor_id=f"{HOSTNAME}:999999:gone", heartbeat_at=timezone.now()
)
"""


def run_status(data_dir) -> tuple[str, int]:
    with sqlite3.connect(data_dir / "evalsite.sqlite3", timeout=30) as db:
        return db.execute("select status, succeeded from runs_run").fetchone()


def test_server_start_resumes_a_run_whose_process_died(data_dir):
    env = env_for(data_dir)
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SETUP],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    assert run_status(data_dir) == ("running", 0)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(free_port()),
            "evalsite.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while run_status(data_dir)[0] == "running":
            assert time.monotonic() < deadline, "the server did not resume the run"
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(10)
    assert run_status(data_dir) == ("completed", 12)

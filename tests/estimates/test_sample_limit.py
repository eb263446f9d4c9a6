"""A paid sample runs its few items and no more, however it is executed: a
resume after its process died, a retry, the shards of the distributed mode."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.estimates.services import estimate_sample
from runs.executor.engine import execute_run
from runs.executor.shard_store import shard_ranges
from runs.executor.store import HOSTNAME
from runs.models import Result, Run
from runs.results.selectors import run_items_lacking
from runs.retry.services import run_retry
from tests.factories import arithmetic_items, make_dataset
from tests.processes import ROOT, env_for, free_port

live_db = pytest.mark.django_db(transaction=True)

DEMO = {"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 0}
FAILING = {"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 1}

# A sample of 4 items out of 20, in a process killed once its first result
# is stored: the run is left running, its other items without a result.
INTERRUPTED_SAMPLE = """
import os, time
from django.contrib.auth.models import User
from runs.estimates.services import estimate_sample
from runs.models import Membership, Project, Result
from tests.factories import arithmetic_items, make_dataset
user = User.objects.get(username="researcher")
project = Project.objects.create(name="P")
Membership.objects.create(project=project, user=user, role="admin")
run = estimate_sample(
    user=user, dataset=make_dataset(project, arithmetic_items(20)),
    target_kind="demo", scorers=["exact_match"], items=4,
    target_config={"min_latency_ms": 300, "max_latency_ms": 300,
                   "transient_error_rate": 0},
    options={"concurrency": 1},
)
deadline = time.monotonic() + 60
while not Result.objects.filter(run=run).exists():
    assert time.monotonic() < deadline, "the sample stored nothing"
    time.sleep(0.01)
os._exit(0)
"""


def sample_state(data_dir: Path) -> tuple[str, int, int]:
    with sqlite3.connect(data_dir / "evalsite.sqlite3", timeout=30) as db:
        status, total, run_id = db.execute(
            "select status, total, id from runs_run"
        ).fetchone()
        (stored,) = db.execute(
            "select count(*) from runs_result where run_id = ?", (run_id,)
        ).fetchone()
    return status, total, stored


def test_a_sample_resumed_after_its_process_died_stores_exactly_its_items(
    data_dir: Path,
) -> None:
    env = env_for(data_dir)
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", INTERRUPTED_SAMPLE],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    status, total, stored = sample_state(data_dir)
    assert (status, total) == ("running", 4) and 1 <= stored < 4
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(free_port()),
         "evalsite.asgi:application"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while sample_state(data_dir)[0] == "running":
            assert time.monotonic() < deadline, "the server did not resume the run"
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(10)
    assert sample_state(data_dir) == ("completed", 4, 4)


def sample(project, user, *, items: int = 4, config: dict | None = None) -> Run:
    dataset = make_dataset(project, arithmetic_items(20))
    run = estimate_sample(
        user=user, dataset=dataset, target_kind="demo", scorers=["exact_match"],
        target_config=config or DEMO, options={"max_attempts": 1}, items=items,
    )  # fmt: skip
    return run


def wait_final(run: Run) -> Run:
    deadline = time.monotonic() + 60
    while not (run := Run.objects.get(pk=run.pk)).is_final:
        assert time.monotonic() < deadline, run.status
        time.sleep(0.02)
    return run


@live_db
def test_a_sample_is_limited_in_the_run_itself(project, alice):
    run = wait_final(sample(project, alice, items=3))
    assert (run.item_limit, run.total, run.processed) == (3, 3, 3)
    stored = Result.objects.filter(run=run).values_list("item_index", flat=True)
    assert sorted(stored) == [0, 1, 2]
    assert (run.status, run.estimate_basis["items"]) == ("completed", 3)


@live_db
def test_an_orphaned_sample_taken_over_runs_only_its_items(project, alice):
    run = wait_final(sample(project, alice))
    # As a process that died before its end leaves it: items without result.
    Result.objects.filter(run=run, item_index__gte=2).delete()
    Run.objects.filter(pk=run.pk).update(
        status="running", executor_id=f"{HOSTNAME}:999999:gone", succeeded=2
    )
    assert asyncio.run(execute_run(run.pk)) == "completed"
    stored = Result.objects.filter(run=run).values_list("item_index", flat=True)
    assert sorted(stored) == [0, 1, 2, 3]


@live_db
def test_a_retried_sample_runs_only_its_items(project, alice):
    run = wait_final(sample(project, alice, config=FAILING))
    assert (run.status, run.failed) == ("failed", 4)
    run_retry(run=run, user=alice, statuses=["failed"], launch=False)
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    assert Result.objects.filter(run=run).count() == 4
    assert (run.total, run.processed, run.failed) == (4, 4, 4)


@live_db
def test_a_sample_is_sharded_and_listed_over_its_items_alone(project, alice):
    run = Run.objects.get(pk=wait_final(sample(project, alice)).pk)
    Result.objects.filter(run=run, item_index=3).delete()
    Run.objects.filter(pk=run.pk).update(status="running")
    assert shard_ranges(run.pk, size=20) == [(3, 4)]
    assert [item.index for item in run_items_lacking(run=run)] == [3]

"""A run's concurrency holds over all its shards and workers (``RunLeases``)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import psycopg
import pytest
import redis
from django.db import connection

from runs.executor.shared_limits import REDIS_PREFIX, run_key
from runs.models import Project, RunShard, RunStatus
from runs.results.services import run_cancel
from runs.testing.fake_openai import FakeOpenAIServer
from tests.distributed.test_workers import distributed_run
from tests.distributed.workers import (
    SHARD_SIZE,
    STALL_SECONDS,
    Workers,
    wait_final,
    wait_for,
)
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)


def leases_held(run_id: int) -> int:
    """The run's leases in the store that have not expired."""
    client: Any = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        seconds, micros = client.time()
        now = seconds + micros / 1_000_000
        return sum(
            client.zcount(key, f"({now}", "+inf")
            # This installation's run: another suite may share the Redis.
            for key in client.scan_iter(f"{REDIS_PREFIX}{run_key(run_id)}:leases")
        )
    finally:
        client.close()


def test_a_runs_calls_in_flight_stay_within_its_concurrency_over_all_workers(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    # Four shards on two workers of two shards each: each shard alone would
    # hold three calls, twelve in all.
    fake_openai.latency_ms = 50
    items = arithmetic_items(4 * SHARD_SIZE)
    workers.start(2, shards=2)
    workers.wait_registered(2)

    run = wait_final(distributed_run(project, fake_openai, items, concurrency=3))

    shards = RunShard.objects.filter(run=run)
    print(f"shards by worker: {sorted(s.worker for s in shards)}")
    print(f"most calls at once at the endpoint: {fake_openai.stats.max_in_flight}")
    assert (run.status, run.succeeded) == (RunStatus.COMPLETED, len(items))
    assert fake_openai.stats.max_in_flight <= 3
    assert leases_held(run.pk) == 0  # every call gave its lease back


def test_a_killed_workers_leases_come_back_to_the_run(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    items = arithmetic_items(SHARD_SIZE, marker="[[hang]]")
    (first,) = workers.start(1)
    run = distributed_run(project, fake_openai, items, concurrency=4)
    wait_for(lambda: fake_openai.stats.in_flight >= 4, what="the run's calls hanging")
    assert leases_held(run.pk) == 4

    first.send_signal(signal.SIGKILL)
    first.wait(10)
    # Its leases expire unrenewed (EVALSITE_STALL_SECONDS) ...
    wait_for(lambda: leases_held(run.pk) == 0, what="the killed worker's leases")
    # ... and the worker that takes its shard over holds the run's calls again.
    requests = fake_openai.stats.requests
    workers.start(1)
    wait_for(
        lambda: fake_openai.stats.requests >= requests + 4 and leases_held(run.pk) == 4,
        what="the shard's calls on the other worker",
    )

    run_cancel(run=run)
    assert wait_final(run).status == RunStatus.CANCELLED


def waiting_on_a_lock(conn: psycopg.Connection[Any]) -> int:
    """Statements of other sessions of this test's database that wait for a
    lock (another test process's database has sessions of its own)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND pid <> pg_backend_pid() AND datname = current_database()"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_worker_whose_database_reads_wait_keeps_its_runs_leases(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    # Found on a busy machine: a worker's watch waited on a database read
    # for longer than a lease lives, its leases lapsed unrenewed, and another
    # worker took the run's places while its calls still held them (the run
    # went over its concurrency: 40 calls at once where it allows 21).
    items = arithmetic_items(SHARD_SIZE, marker="[[hang]]")
    workers.start(1)
    run = distributed_run(project, fake_openai, items, concurrency=4)
    wait_for(lambda: fake_openai.stats.in_flight >= 4, what="the run's calls hanging")
    assert leases_held(run.pk) == 4

    where = connection.settings_dict
    with psycopg.connect(
        host=where["HOST"], port=where["PORT"], user=where["USER"], dbname=where["NAME"]
    ) as lock:
        lock.execute("LOCK TABLE runs_run IN ACCESS EXCLUSIVE MODE")
        # The worker's watch reads the run each tick: it now waits.
        wait_for(lambda: waiting_on_a_lock(lock) >= 1, what="the watch waiting")
        # Longer than a lease lives unrenewed.
        time.sleep(STALL_SECONDS + 1.5)
        held = leases_held(run.pk)
        lock.rollback()
    assert held == 4, f"{held} of the 4 leases left while the watch waited"

    run_cancel(run=run)
    assert wait_final(run).status == RunStatus.CANCELLED

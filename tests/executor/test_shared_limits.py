"""Limits shared across executors: the bucket's maths, each store, and runs.

The stores are tested alike: this process's, Redis (REDIS_URL, the
PostgreSQL pass) and PostgreSQL. Executions share a run's retry budget in any
database. Processes sharing a target's rate and back-off need PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from runs.calls.limits import reservation
from runs.executor import shared_limits, store
from runs.executor.engine import Execution, execute_run
from runs.executor.shared_limits import (
    Degrading,
    LocalStore,
    RedisStore,
    SharedConcurrency,
    limit_key,
)
from runs.models import Project, Result, Run, RunStatus
from runs.retry.services import run_retry
from runs.testing.fake_openai import FakeOpenAIServer, Stats
from tests.factories import arithmetic_items, make_dataset
from tests.processes import free_port

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent.parent
REDIS_URL = os.environ.get("REDIS_URL", "")
needs_redis = pytest.mark.skipif(
    not REDIS_URL, reason="needs Redis (REDIS_URL): run in the PostgreSQL pass"
)


def needs_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): run in the PostgreSQL pass")


# -- the bucket's maths ----------------------------------------------------------


def test_a_burst_of_a_window_goes_at_once_then_calls_are_paced() -> None:
    tat, waits = 0.0, []
    for _ in range(15):  # all at time 100: the first ten fill the window
        answer = reservation(tat, 100.0, 0.1, 1.0)
        tat = answer.tat
        waits.append(round(answer.wait, 6))
    assert waits[:10] == [round(0.1 * k - 1.0, 6) for k in range(1, 11)]
    assert all(w <= 0 for w in waits[:10])
    assert waits[10:] == [0.1, 0.2, 0.3, 0.4, 0.5]


def test_places_are_given_out_at_most_a_window_beyond_the_burst() -> None:
    answer = reservation(102.0, 100.0, 0.1, 1.0)  # two windows taken already
    assert not answer.reserved and answer.tat is None
    assert answer.wait == pytest.approx(0.1)  # then it may ask again


def test_a_quiet_bucket_starts_from_now_again() -> None:
    answer = reservation(50.0, 100.0, 0.1, 1.0)
    assert answer.reserved and answer.tat == pytest.approx(100.1)


def test_runs_with_different_limits_take_their_own_share_of_one_bucket() -> None:
    slow = reservation(0.0, 100.0, 6.0, 6.0)  # 10 a minute: the next 6 s
    fast = reservation(slow.tat, 100.0, 0.1, 1.0)  # 600 a minute, after it
    assert (fast.reserved, fast.wait) == (False, pytest.approx(4.1))
    fast = reservation(slow.tat, 104.1, 0.1, 1.0)  # when it asks again
    assert fast.reserved and fast.tat == pytest.approx(106.1)
    assert fast.wait == pytest.approx(1.0)  # it goes at 105.1


def test_a_saved_target_is_the_key_else_the_endpoint() -> None:
    config = {"base_url": "http://a.example/v1", "model": "m", "temperature": 0}
    saved = limit_key(7, "openai_chat", config)
    assert saved.startswith("target:") and saved.endswith(":7")
    assert saved != limit_key(8, "openai_chat", config)
    same = limit_key(None, "openai_chat", {**config, "temperature": 1})
    assert same == limit_key(None, "openai_chat", config)
    other = limit_key(None, "openai_chat", {**config, "model": "n"})
    assert other != same and same.startswith("endpoint:")


# -- each store --------------------------------------------------------------------


def test_concurrent_reservations_are_each_counted_once(make_store) -> None:
    """Forty callers on two clients at once, then one more: its place is
    after all forty (a lost update would put it a whole interval earlier)."""
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[float, float]:
        stores = [make_store(), make_store()]
        began = time.monotonic()
        answers = await asyncio.gather(
            *(stores[i % 2].reserve(key, 1.0, 100.0) for i in range(40))
        )
        assert all(reserved for reserved, _ in answers)
        _, wait = await stores[0].reserve(key, 1.0, 100.0)
        for client in stores:
            if isinstance(client, RedisStore):
                await client.aclose()
        return wait, time.monotonic() - began

    wait, elapsed = asyncio.run(scenario())
    # The 41st place is 41 s after the first call; the window takes 100 off.
    assert -59.0 - elapsed - 0.01 <= wait <= -59.0 + 0.01


def test_a_full_queue_tells_the_caller_when_to_ask_again(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[list[tuple[bool, float]], float]:
        client = make_store()
        began = time.monotonic()
        answers = [await client.reserve(key, 1.0, 1.0) for _ in range(3)]
        elapsed = time.monotonic() - began
        if isinstance(client, RedisStore):
            await client.aclose()
        return answers, elapsed

    # One a second, bursts of one: the first goes, the second waits its
    # second, the third would be two away, so it takes no place and is told
    # to ask again when the second's place is reached: a second after the
    # first call, less the time the three calls took (however slow the
    # machine).
    answers, elapsed = asyncio.run(scenario())
    assert [reserved for reserved, _ in answers] == [True, True, False]
    assert 1.0 - elapsed - 0.01 <= answers[2][1] <= 1.0 + 0.01, (answers, elapsed)


def test_a_burst_announced_once_per_cooldown_expires_after_the_hold(
    make_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> list[int]:
        first, second = make_store(), make_store()
        seen = [await first.backoff_raise(key), await second.backoff_raise(key)]
        seen.append(await second.backoff_level(key))
        monkeypatch.setattr(shared_limits, "THROTTLE_COOLDOWN", 0.0)
        seen.append(await second.backoff_raise(key))
        monkeypatch.setattr(shared_limits, "BACKOFF_HOLD", 0.3)
        seen.append(await first.backoff_raise(key))
        await asyncio.sleep(0.6)
        seen.append(await first.backoff_level(key))
        for client in (first, second):
            if isinstance(client, RedisStore):
                await client.aclose()
        return seen

    # Two bursts within the cooldown are one halving; the level then ends.
    assert asyncio.run(scenario()) == [1, 1, 1, 2, 3, 0]


def test_a_burst_on_one_worker_halves_every_worker_on_the_target(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, int, int]:
        throttled = SharedConcurrency(
            8, adaptive=True, store=Degrading(make_store(), 1), key=key
        )
        other = SharedConcurrency(
            8, adaptive=True, store=Degrading(make_store(), 2), key=key
        )
        for _ in range(3):  # a burst of 429s (THROTTLE_BURST)
            throttled.throttled()
        await throttled.aclose()  # its announcement reached the store
        await other.sync()
        later = SharedConcurrency(
            8, adaptive=True, store=Degrading(make_store(), 3), key=key
        )
        await later.sync()
        for worker in (throttled, other, later):
            await worker.store.aclose()
        return throttled.limit, other.limit, later.limit

    assert asyncio.run(scenario()) == (4, 4, 4)


# -- runs --------------------------------------------------------------------------


def execute_shards(run: Run, ranges: list[tuple[int, int]]) -> list[str]:
    """Execute shards of ``run`` at once, as separate executors would."""

    async def together() -> list[str]:
        spec = await database_sync_to_async(store.run_claim)(run.pk)
        assert spec is not None
        shards = [Execution(spec, index_range=r) for r in ranges]
        return list(await asyncio.gather(*(s.execute() for s in shards)))

    statuses = asyncio.run(together())
    connection.close()  # the threads' connections are not this one
    return statuses


def test_shards_of_a_run_draw_from_its_one_retry_budget(make_run) -> None:
    items = arithmetic_items(20, marker="[[flaky:1]]")  # first call: a 500
    run = make_run(items, max_attempts=3, retry_budget=5, concurrency=4)

    statuses = execute_shards(run, [(0, 10), (10, 20)])

    run.refresh_from_db()
    attempts = sum(len(a) for a in Result.objects.values_list("attempts", flat=True))
    assert RunStatus.COMPLETED_WITH_ERRORS in statuses
    assert (run.retries_used, attempts - 20) == (5, 5)  # not five per shard
    assert (run.succeeded, run.failed) == (5, 15)


def test_a_retry_pass_has_the_whole_retry_budget_again(make_run) -> None:

    items = arithmetic_items(1, marker="[[flaky:3]]")  # three 500s, then answers
    run = make_run(items, max_attempts=3, retry_budget=1)
    asyncio.run(execute_run(run.pk))  # a 500, a retry, a 500: budget spent
    run.refresh_from_db()
    assert (run.retries_used, run.failed) == (1, 1)

    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    asyncio.run(execute_run(run.pk))  # a 500, a retry again, an answer

    run.refresh_from_db()
    assert (run.retries_used, run.succeeded) == (1, 1)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A Redis server of this test's own, to stop in the middle of a run."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("needs redis-server to start a Redis that can be stopped")
    port = free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0", server
    finally:
        server.kill()
        server.wait()


def test_a_run_goes_on_with_local_limits_when_redis_goes_away(
    make_run,
    fake_openai: FakeOpenAIServer,
    private_redis: tuple[str, subprocess.Popen],
    settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import redis

    url, server = private_redis
    settings.REDIS_URL = url
    run = make_run(arithmetic_items(40), rate_limit_rpm=1200, concurrency=4)
    used_redis: list[bytes] = []

    def stop_redis_mid_run() -> None:
        while fake_openai.stats.requests < 15:
            time.sleep(0.01)
        used_redis.extend(redis.Redis.from_url(url).keys("evalsite:limits:*"))
        server.kill()

    stopper = threading.Thread(target=stop_redis_mid_run, daemon=True)
    stopper.start()
    with caplog.at_level(logging.WARNING, logger="runs.executor.shared_limits"):
        status = asyncio.run(execute_run(run.pk))
    stopper.join(5)

    assert used_redis  # the bucket was in Redis until it stopped
    assert status == RunStatus.COMPLETED
    assert Result.objects.filter(run=run).count() == 40
    assert "shared limits in redis are unavailable" in caplog.text


@needs_redis
@pytest.mark.parametrize("method", ["backoff_level", "backoff_raise", "reserve"])
def test_a_value_planted_in_redis_fails_the_store_not_the_run(method: str) -> None:
    """Another writer's values under a target's keys: the call is paced by
    this process, as when Redis is away."""
    import redis

    key = f"planted-{uuid.uuid4().hex}"
    server = redis.Redis.from_url(REDIS_URL)
    where = shared_limits.REDIS_PREFIX + key
    server.set(where + ":rate", "not a number", ex=60)
    server.hset(where + ":backoff", mapping={"level": "x", "last": "y"})
    server.expire(where + ":backoff", 60)
    server.close()
    args = {"reserve": (key, 0.1, 1.0)}.get(method, (key,))

    async def call() -> object:
        degrading = Degrading(RedisStore(REDIS_URL), run_id=0)
        try:
            return await degrading.call(method, *args)
        finally:
            await degrading.aclose()

    assert asyncio.run(call()) == asyncio.run(getattr(LocalStore(), method)(*args))


# -- processes ---------------------------------------------------------------------


def database_url_of_tests() -> str:
    config = connection.settings_dict
    password = f":{config['PASSWORD']}" if config.get("PASSWORD") else ""
    return (
        f"postgres://{config['USER']}{password}@{config['HOST'] or '127.0.0.1'}:"
        f"{config['PORT'] or 5432}/{config['NAME']}"
    )


WORKER = """
import asyncio, os, pathlib, sys, time
import django
django.setup()
from runs.executor.engine import execute_run
ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
ready.touch()
while not go.exists():
    time.sleep(0.01)
print(asyncio.run(execute_run(int(sys.argv[3]))))
"""


def run_in_processes(
    runs: list[Run],
    tmp_path: Path,
    *,
    redis_url: str,
    meanwhile: Callable[[], None] | None = None,
) -> list[subprocess.CompletedProcess]:
    """Execute each run in a process of its own, all starting at one moment;
    ``meanwhile`` is called again and again while they run."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        DATABASE_URL=database_url_of_tests(),
        EVALSITE_DATA_DIR=str(tmp_path),
        PYTHONPATH=str(ROOT),
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    go = tmp_path / f"go-{uuid.uuid4().hex}"
    workers = []
    for run in runs:
        ready, out = tmp_path / f"ready-{run.pk}", tmp_path / f"out-{run.pk}"
        command = [sys.executable, "-c", WORKER, str(ready), str(go), str(run.pk)]
        with open(out, "w") as stdout, open(f"{out}.err", "w") as stderr:
            process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=stdout, stderr=stderr
            )
        workers.append((ready, out, process))
    deadline = time.monotonic() + 60
    while not all(ready.exists() for ready, _, _ in workers):
        assert time.monotonic() < deadline, "the workers did not start"
        assert all(w.poll() is None for _, _, w in workers), "a worker exited"
        time.sleep(0.05)
    go.touch()
    deadline = time.monotonic() + 120
    while any(w.poll() is None for _, _, w in workers):
        if time.monotonic() > deadline:
            for _, _, worker in workers:
                worker.kill()
            raise AssertionError("the workers did not end")
        if meanwhile is not None:
            meanwhile()
        time.sleep(0.02)
    return [
        subprocess.CompletedProcess(
            worker.args,
            worker.returncode,
            out.read_text(),
            Path(f"{out}.err").read_text(),
        )
        for _, out, worker in workers
    ]


def most_in_any(arrivals: list[float], seconds: float) -> int:
    """The most requests that arrived within any ``seconds`` of each other."""
    times = sorted(arrivals)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= seconds:
            first += 1
        most = max(most, last - first + 1)
    return most


SHARED_STORES = [
    pytest.param(REDIS_URL, id="redis", marks=needs_redis),
    pytest.param("", id="postgresql"),
]


@pytest.mark.parametrize("redis_url", SHARED_STORES)
def test_two_processes_send_at_most_the_limit_together(
    make_run,
    project: Project,
    fake_openai: FakeOpenAIServer,
    tmp_path: Path,
    redis_url: str,
) -> None:
    needs_postgresql()
    # 600 a minute: ten a second, in bursts of at most a second's worth.
    runs = [
        make_run(
            arithmetic_items(25),
            dataset=make_dataset(project, arithmetic_items(25), name=name),
            rate_limit_rpm=600,
            concurrency=8,
        )
        for name in ("first", "second")
    ]

    done = run_in_processes(runs, tmp_path, redis_url=redis_url)

    assert [(p.returncode, p.stdout.strip()) for p in done] == [
        (0, RunStatus.COMPLETED)
    ] * 2, [p.stderr[-2000:] for p in done]
    assert fake_openai.stats.requests == 50
    # Any 2 s hold at most 2 s of calls, a window's burst, one more, and a
    # little for the way from the limiter to the server; each process alone
    # would send its 25 within 2 s, 50 together.
    assert most_in_any(fake_openai.stats.arrivals, 2.0) <= 20 + 10 + 1 + 4


@pytest.mark.parametrize("redis_url", SHARED_STORES)
def test_a_burst_of_429s_seen_by_one_process_slows_another(
    make_run,
    project: Project,
    fake_openai: FakeOpenAIServer,
    tmp_path: Path,
    redis_url: str,
) -> None:
    needs_postgresql()
    busy = arithmetic_items(6, marker="[[status:429]]")
    throttled = make_run(
        busy,
        dataset=make_dataset(project, busy, name="busy"),
        max_attempts=1,
        concurrency=3,
    )
    slow = arithmetic_items(8, marker="[[latency:400]]")
    later = make_run(
        slow, dataset=make_dataset(project, slow, name="slow"), concurrency=8
    )

    first = run_in_processes([throttled], tmp_path, redis_url=redis_url)
    assert first[0].stdout.strip() == RunStatus.FAILED, first[0].stderr[-2000:]
    fake_openai.stats = Stats()
    second = run_in_processes([later], tmp_path, redis_url=redis_url)

    assert second[0].stdout.strip() == RunStatus.COMPLETED, second[0].stderr[-2000:]
    # Without the other's 429s it would hold all 8 calls in flight at once.
    assert fake_openai.stats.max_in_flight <= 4 + 1


def test_shards_of_a_run_stop_at_its_one_cost_budget(make_run, settings) -> None:
    settings.EVALSITE_PRICES = {"fake": (1000.0, 3000.0)}
    item_cost = 0.008  # "What is 1 + 2?": 5 prompt words, "3" one completion
    items = arithmetic_items(60, marker="[[latency:400]]")
    budget = 10 * item_cost
    run = make_run(items, concurrency=1, cost_budget=budget)

    execute_shards(run, [(0, 30), (30, 60)])

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.skipped > 0
    # Each shard alone would spend the budget: twenty items or more. Together
    # they pass it by what was in flight or not yet read from the run.
    assert budget <= run.cost < 2 * budget
    assert run.processed < 20


@pytest.mark.parametrize("redis_url", SHARED_STORES)
def test_a_429_burst_slows_a_process_already_running_on_the_target(
    make_run,
    project: Project,
    fake_openai: FakeOpenAIServer,
    tmp_path: Path,
    redis_url: str,
) -> None:
    needs_postgresql()
    slow = arithmetic_items(40, marker="[[latency:400]]")
    running = make_run(
        slow, dataset=make_dataset(project, slow, name="slow"), concurrency=8
    )
    busy = arithmetic_items(6, marker="[[status:429]]")
    throttled = make_run(
        busy,
        dataset=make_dataset(project, busy, name="busy"),
        max_attempts=1,
        concurrency=3,
    )
    limits: set[int] = set()

    def watch_the_running_one() -> None:
        limit = Run.objects.values_list("throttle_limit", flat=True).get(pk=running.pk)
        if limit is not None:
            limits.add(limit)

    done = run_in_processes(
        [running, throttled],
        tmp_path,
        redis_url=redis_url,
        meanwhile=watch_the_running_one,
    )

    assert [p.stdout.strip() for p in done] == [
        RunStatus.COMPLETED,
        RunStatus.FAILED,
    ], [p.stderr[-2000:] for p in done]
    statuses = {
        attempt.get("http_status")
        for attempts in Result.objects.filter(run=running).values_list(
            "attempts", flat=True
        )
        for attempt in attempts
    }
    assert statuses == {200}  # it saw no 429 itself ...
    assert limits and min(limits) <= 4  # ... and backed off to half

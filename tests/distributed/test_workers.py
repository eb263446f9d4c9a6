"""Runs over worker subprocesses: spread, crash, cancel, web server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from runs.models import Project, Result, RetryPass, Run, RunShard, RunStatus
from runs.results.services import run_cancel, run_create
from runs.retry.services import run_retry
from runs.testing.fake_openai import FakeOpenAIServer
from tests.distributed.workers import (
    ROOT,
    SHARD_SIZE,
    Workers,
    wait_final,
    wait_for,
    worker_env,
)
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db(transaction=True)


def distributed_run(
    project: Project,
    fake: FakeOpenAIServer,
    items: list[dict[str, Any]],
    **options: Any,
) -> Run:
    return run_create(
        user=None,
        dataset=make_dataset(project, items),
        target_kind="openai_chat",
        target_config={"base_url": fake.base_url, "model": "fake"},
        scorers=["exact_match"],
        options={"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05, **options},
    )


def one_result_per_item(run: Run) -> None:
    rows = list(Result.objects.filter(run=run).values_list("item_id", "epoch"))
    assert len(rows) == len(set(rows))


def test_evalrun_over_three_workers_stores_every_result_once(
    workers: Workers, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    get_user_model().objects.create_user("researcher")
    items = arithmetic_items(9 * SHARD_SIZE, marker="[[latency:100]]")
    data = tmp_path / "arith.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in items))
    workers.start(3)
    workers.wait_registered(3)

    done = subprocess.run(
        [
            *(sys.executable, "manage.py", "evalrun", str(data), "--json"),
            *("--base-url", fake_openai.base_url, "--model", "fake"),
            *("--scorer", "exact_match", "--concurrency", "5"),
        ],
        cwd=ROOT,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "completed"
    assert summary["succeeded"] == len(items)
    run = Run.objects.get(pk=summary["run_id"])
    assert Result.objects.filter(run=run).count() == len(items)
    one_result_per_item(run)
    assert len(fake_openai.stats.prompts) == len(items)
    assert set(fake_openai.stats.prompts.values()) == {1}  # every call once
    shards = RunShard.objects.filter(run=run)
    assert {shard.status for shard in shards} == {RunShard.Status.DONE}
    assert shards.count() == 9
    assert len({shard.worker for shard in shards}) == 3  # all three took part


def test_sigkilled_worker_shard_is_finished_by_the_others(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    items = arithmetic_items(12 * SHARD_SIZE, marker="[[latency:200]]")
    processes = workers.start_registered(3)
    run = distributed_run(project, fake_openai, items, concurrency=4)

    # A shard half done on some worker: kill that worker outright.
    victim, shard = workers.kill_shard_holder(run)

    wait_final(run)
    assert run.status == RunStatus.COMPLETED
    assert run.succeeded == run.total == len(items)
    assert Result.objects.filter(run=run).count() == len(items)
    one_result_per_item(run)
    shard.refresh_from_db()
    assert shard.status == RunShard.Status.DONE
    assert shard.claims == 2  # taken over after its worker was seen stalled
    assert f":{victim.pid}:" not in shard.worker
    # Only what the shard held in flight (or unflushed) was asked again.
    repeated = sum(n - 1 for n in fake_openai.stats.prompts.values())
    assert len(fake_openai.stats.prompts) == len(items)
    print(f"calls repeated after the SIGKILL: {repeated}")
    assert repeated <= SHARD_SIZE
    # The survivors said so, once a line, with the time.
    said = [
        line
        for index, process in enumerate(processes)
        if process is not victim
        for line in workers.log(index).splitlines()
        if "its worker is stalled" in line
    ]
    assert said and all(line.startswith("20") for line in said), said


def test_cancel_stops_every_worker_and_keeps_finished_results(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    # The first two shards answer; the others hang until their request closes.
    fast = arithmetic_items(2 * SHARD_SIZE)
    hanging = arithmetic_items(4 * SHARD_SIZE, marker="[[hang]]")[2 * SHARD_SIZE :]
    workers.start(2)
    workers.wait_registered(2)
    # The run's concurrency is over all its shards: room for both hanging
    # shards' calls, so a hanging shard never holds every call the answering
    # shards need (at 8, one hanging shard took all 8 and starved the other).
    run = distributed_run(
        project, fake_openai, fast + hanging, concurrency=2 * SHARD_SIZE
    )
    wait_for(
        lambda: run.results.filter(status=Result.Status.SUCCEEDED).count() == len(fast),
        what="the answering shards' results stored",
    )
    wait_for(lambda: fake_openai.stats.in_flight >= 8, what="the run's calls hanging")
    wait_for(
        lambda: (
            len({s.worker for s in RunShard.objects.filter(run=run, status="running")})
            == 2
        ),
        what="a shard running on each worker",
    )

    run_cancel(run=run)
    started = time.monotonic()
    wait_for(lambda: fake_openai.stats.in_flight == 0, what="hung requests closed")
    print(f"in-flight requests closed {time.monotonic() - started:.2f} s after cancel")

    wait_final(run)
    assert run.status == RunStatus.CANCELLED
    assert run.succeeded == len(fast)  # finished results kept
    assert fake_openai.stats.disconnects >= 8
    assert run.cancelled + run.skipped == len(hanging)
    assert run.processed + run.skipped == run.total
    assert not RunShard.objects.filter(run=run, status__in=["pending", "running"])
    wait_for(lambda: jobs_left() == 0, what="every job ended")


def test_a_shard_failing_fast_stops_every_shard_of_the_run(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    # The second shard's items all fail; the others hang until stopped.
    items = arithmetic_items(6 * SHARD_SIZE)
    for index, item in enumerate(items):
        failing = SHARD_SIZE <= index < 2 * SHARD_SIZE
        item["input"] += "[[status:400]]" if failing else "[[hang]]"
    workers.start(1)
    workers.wait_registered(1)
    # The run's concurrency is over all its shards: the first shard's items
    # leave the failing shard one call at a time.
    run = distributed_run(
        project,
        fake_openai,
        items,
        concurrency=SHARD_SIZE + 1,
        max_attempts=1,
        fail_fast_error_rate=0.5,
        fail_fast_min_items=10,
    )
    # The first shard holds all its calls on one worker (20 of the run's 21
    # slots); then a second worker takes the failing shard, the others wait
    # in the queue. Started while the first shard was still taking its
    # slots, the failing shard could take them instead and make its 20 calls
    # at once, before the fail-fast rate saw 10 of them.
    wait_for(
        lambda: fake_openai.stats.in_flight >= SHARD_SIZE,
        what=f"the first shard's {SHARD_SIZE} calls in flight",
    )
    workers.start(1)

    wait_final(run)

    assert run.status == RunStatus.FAILED
    assert run.error.startswith("stopped early: "), run.error
    assert "fail-fast threshold 50%" in run.error
    assert run.processed + run.skipped == run.total == len(items)
    one_result_per_item(run)
    print(f"calls made: {fake_openai.stats.requests} for {len(items)} items")
    # Well below the run's items: it stopped with its failing shard.
    assert fake_openai.stats.requests < 2 * SHARD_SIZE
    first, _, *queued = RunShard.objects.filter(run=run).order_by("start")
    # The running shard stopped early, its calls in flight kept as a stop does.
    assert first.status == RunShard.Status.STOPPED
    stopped = Result.objects.filter(
        run=run,
        item_index__lt=SHARD_SIZE,
        status=Result.Status.CANCELLED,
        error_message=f"in flight when the run stopped: {run.error}",
    )
    assert stopped.count() >= 1
    first_shard = run.results.filter(item_index__lt=SHARD_SIZE)
    assert not first_shard.filter(status=Result.Status.SUCCEEDED).exists()
    # The queued shards ended without a call.
    for shard in queued:
        assert (shard.status, shard.claims) == (RunShard.Status.STOPPED, 0)
    assert not run.results.filter(item_index__gte=2 * SHARD_SIZE).exists()
    wait_for(lambda: jobs_left() == 0, what="every job ended")


def jobs_left() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        )
        return cursor.fetchone()[0]


def test_web_server_never_executes_a_distributed_run(
    project: Project, fake_openai: FakeOpenAIServer, distributed: None, tmp_path: Path
) -> None:
    from tests.processes import free_port

    run = distributed_run(project, fake_openai, arithmetic_items(30))
    # As a server restart finds it: running, its executor long gone.
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        heartbeat_at=None,
        created_at=timezone.now() - timedelta(hours=1),
    )
    port = free_port()
    log = (tmp_path / "daphne.log").open("wb")
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)),
            "evalsite.asgi:application",
        ],
        cwd=ROOT,
        env=worker_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        import httpx

        def answers() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/login/").status_code < 500
            except httpx.TransportError:
                return False

        wait_for(answers, what="the web server answers")
        # The embedded server resumes such a run at once; this one must not.
        time.sleep(2)
        assert fake_openai.stats.requests == 0
        run.refresh_from_db()
        assert run.processed == 0
        assert set(
            RunShard.objects.filter(run=run).values_list("status", flat=True)
        ) == {RunShard.Status.PENDING}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)


def test_stopped_worker_finishes_its_shard_and_takes_no_other(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    items = arithmetic_items(2 * SHARD_SIZE, marker="[[latency:500]]")
    (first,) = workers.start(1)
    workers.wait_registered(1)
    run = distributed_run(project, fake_openai, items, concurrency=10)
    wait_for(lambda: fake_openai.stats.in_flight >= 10, what="a shard in flight")

    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 0

    finished, waiting = RunShard.objects.filter(run=run).order_by("start")
    assert (finished.status, finished.claims) == (RunShard.Status.DONE, 1)
    assert waiting.status == RunShard.Status.PENDING and waiting.claims == 0
    workers.start(1)
    wait_final(run)
    assert run.status == RunStatus.COMPLETED
    assert set(fake_openai.stats.prompts.values()) == {1}  # nothing ran twice


def test_worker_stopped_twice_hands_its_shard_back(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    items = arithmetic_items(2 * SHARD_SIZE, marker="[[latency:1500]]")
    (first,) = workers.start(1)
    workers.wait_registered(1)
    run = distributed_run(project, fake_openai, items, concurrency=10)
    wait_for(lambda: fake_openai.stats.in_flight >= 10, what="a shard in flight")

    first.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    first.send_signal(signal.SIGTERM)  # at once, without waiting for the calls
    assert first.wait(30) == 0

    shard = RunShard.objects.filter(run=run).order_by("start").first()
    assert (shard.status, shard.worker, shard.claims) == ("pending", "", 1)
    assert run.results.count() == 0  # none half done, none marked cancelled
    workers.start(1)
    wait_final(run)
    assert run.status == RunStatus.COMPLETED
    assert run.results.count() == len(items)
    one_result_per_item(run)
    repeated = sum(n - 1 for n in fake_openai.stats.prompts.values())
    assert 0 < repeated <= SHARD_SIZE  # the handed-back calls, asked again


def test_retry_defers_only_the_shards_with_items_to_run_again(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    items = arithmetic_items(3 * SHARD_SIZE)
    broken = [SHARD_SIZE + 3, SHARD_SIZE + 7]  # two items of the second shard
    for index in broken:
        items[index]["input"] += "[[status:400]]"
    workers.start(2)
    run = distributed_run(project, fake_openai, items, max_attempts=1)
    wait_final(run)
    assert run.status == RunStatus.COMPLETED_WITH_ERRORS and run.failed == 2

    run_retry(run=run, user=None, statuses=["failed"])

    (shard,) = RunShard.objects.filter(run=run)
    assert (shard.start, shard.stop) == (SHARD_SIZE + 3, SHARD_SIZE + 8)
    wait_final(run)
    assert run.status == RunStatus.COMPLETED_WITH_ERRORS
    assert run.processed == run.total == len(items)
    asked = fake_openai.stats.prompts
    assert sorted(n for n in asked.values() if n > 1) == [2, 2]  # only those


def test_a_retry_over_workers_keeps_the_runs_timing_and_records_its_pass(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    items = arithmetic_items(2 * SHARD_SIZE)
    for index in (3, SHARD_SIZE + 3):
        items[index]["input"] += "[[status:400]]"  # fails again when retried
    workers.start(2)
    run = distributed_run(project, fake_openai, items, max_attempts=1)
    wait_final(run)
    first = (run.started_at, run.finished_at)

    run_retry(run=run, user=None, statuses=["failed"])
    wait_for(
        lambda: not RetryPass.objects.filter(run=run, finished_at=None).exists(),
        what="the retry pass ended",
    )
    wait_final(run)

    assert (run.started_at, run.finished_at) == first
    (retry,) = RetryPass.objects.filter(run=run)
    assert (retry.results, retry.replaced, retry.kept) == (2, 2, 0)
    assert retry.started_at is not None and retry.started_at >= first[1]
    assert run.retry_replaced == 2 and run.retry_replaced_answers == 0
    assert (run.succeeded, run.failed) == (len(items) - 2, 2)
    assert run.succeeded == Result.objects.filter(run=run, status="succeeded").count()
    one_result_per_item(run)
    numbers = Result.objects.get(run=run, item_index=3).attempts
    assert [a["number"] for a in numbers] == [1, 2]


def test_runs_go_on_while_redis_is_unavailable(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    from tests.processes import free_port

    # Nothing listens there: every progress message fails, the run does not.
    workers.start(2, env=worker_env(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"))
    run = distributed_run(project, fake_openai, arithmetic_items(2 * SHARD_SIZE))
    wait_final(run)
    assert run.status == RunStatus.COMPLETED
    assert run.succeeded == run.total


def test_a_rescore_is_executed_by_a_worker_not_the_web_server(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    from runs.models import Score, ScoringPass
    from runs.rescore.services import run_rescore

    (worker,) = workers.start(1)
    run = distributed_run(project, fake_openai, arithmetic_items(SHARD_SIZE))
    wait_final(run)

    plan = run_rescore(
        run=run, user=None, scorers=[{"kind": "includes", "name": "has"}]
    )

    scoring = plan.scoring_pass

    def ended() -> bool:
        scoring.refresh_from_db()
        return scoring.status not in (
            ScoringPass.Status.PENDING,
            ScoringPass.Status.RUNNING,
        )

    wait_for(ended, what="the scoring pass ended")
    assert scoring.status == ScoringPass.Status.COMPLETED
    # Executed by the worker process, not by this one (the web server's part).
    assert f":{worker.pid}:" in scoring.executor_id
    assert Score.objects.filter(result__run=run, scorer="has").count() == SHARD_SIZE


def test_evalrun_says_when_no_worker_takes_its_run(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    get_user_model().objects.create_user("researcher")
    data = tmp_path / "arith.jsonl"
    data.write_text(
        "".join(json.dumps(item) + "\n" for item in arithmetic_items(SHARD_SIZE))
    )
    evalrun = subprocess.Popen(
        [
            *(sys.executable, "manage.py", "evalrun", str(data), "--json"),
            *("--base-url", fake_openai.base_url, "--model", "fake"),
            *("--scorer", "exact_match"),
        ],
        cwd=ROOT,
        env=worker_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = evalrun.stderr.readline()
            lines.append(line)
            if "no worker has taken a shard" in line:
                break
        assert "no worker has taken a shard" in lines[-1], lines
        assert "evalworker" in lines[-1]
    finally:
        evalrun.send_signal(signal.SIGTERM)  # cancels the run, as Ctrl-C does
        out, _ = evalrun.communicate(timeout=30)
    assert json.loads(out)["status"] == "cancelled"

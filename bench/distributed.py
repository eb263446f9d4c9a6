"""The distributed mode's throughput, and a run that survives a killed worker.

Creates a scratch PostgreSQL database on ``DATABASE_URL``'s server (never the
database the URL names; dropped at the end), starts the fake model server with
a fixed latency and N ``evalworker`` processes, then times ``evalrun
--detach`` runs from the run's start to its end (the run's own wall time):

- the same items at ``--latency-ms`` with 1, 2 and 4 workers (``--workers``),
  each run of concurrency ``--concurrency``; the limit is
  ``workers x concurrency / latency`` items a second;
- with ``--kill-items N``: an N-item run over 4 workers, one SIGKILLed
  mid-run; it must end completed with N results, and the calls the fake server
  answered twice are counted.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/distributed.py
    ... bench/distributed.py --items 2000 --workers 1,2   # a quick try

Each worker is one process; on a machine with fewer cores than workers, the
figure says more about the cores than about the design: the load average is
printed with each line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Scratch:
    """A scratch database on the server of ``DATABASE_URL``."""

    def __init__(self, url: str) -> None:
        base, _, _ = url.rpartition("/")
        self.admin = base.replace("postgres://", "postgresql://") + "/postgres"
        self.name = f"evalsite_bench_{uuid.uuid4().hex[:8]}"
        self.url = f"{base}/{self.name}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name))
            )

    def query(self, text: str) -> list[tuple]:
        with psycopg.connect(self.url.replace("postgres://", "postgresql://")) as c:
            return c.execute(text).fetchall()

    def drop(self) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.name)
                )
            )


def env_for(scratch: Scratch, shard_size: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DATABASE_URL=scratch.url,
        EVALSITE_EXECUTOR="procrastinate",
        EVALSITE_SHARD_SIZE=str(shard_size),
        EVALSITE_STALL_SECONDS="6",
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def dataset(path: Path, items: int) -> None:
    with path.open("w") as out:
        for i in range(items):
            row = {"id": str(i), "input": f"What is {i} + {i}?", "expected": str(2 * i)}
            out.write(json.dumps(row) + "\n")


def wait_end(scratch: Scratch, run_id: int, timeout: float = 3600) -> tuple:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = scratch.query(
            "SELECT status, succeeded, total, "
            "EXTRACT(EPOCH FROM finished_at - started_at) "
            f"FROM runs_run WHERE id = {run_id}"
        )[0]
        if row[0] not in ("pending", "running"):
            return row
        time.sleep(0.25)
    raise TimeoutError(f"run {run_id} did not end")


def start_workers(
    env: dict[str, str], count: int, logs: Path
) -> list[subprocess.Popen]:
    workers = []
    for i in range(count):
        log = (logs / f"worker-{len(list(logs.iterdir()))}-{i}.log").open("wb")
        workers.append(
            subprocess.Popen(
                [PYTHON, "manage.py", "evalworker", "--concurrency", "1"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    return workers


def wait_registered(scratch: Scratch, count: int) -> None:
    while scratch.query("SELECT count(*) FROM procrastinate_workers")[0][0] < count:
        time.sleep(0.2)


def stop(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.wait(120)


def evalrun(env: dict[str, str], data: Path, base_url: str, concurrency: int) -> int:
    out = manage(
        env,
        *("evalrun", str(data), "--detach", "--base-url", base_url),
        *("--model", "fake", "--scorer", "exact_match"),
        *("--concurrency", str(concurrency)),
    )
    return int(out.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--shard-size", type=int, default=500)
    parser.add_argument("--kill-items", type=int, default=0)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("DATABASE_URL must name a PostgreSQL server (and REDIS_URL be set)")

    scratch = Scratch(os.environ["DATABASE_URL"])
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-bench-"))
    port = free_port()
    fake = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "runs.testing.fake_openai",
            "--port",
            str(port),
            "--latency-ms",
            str(args.latency_ms),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    env = env_for(scratch, args.shard_size)
    try:
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "shell", "-c", "from django.contrib.auth import get_user_model; "
               "get_user_model().objects.create_user('bench')")  # fmt: skip
        data = tmp / "items.jsonl"
        dataset(data, args.items)
        single = None
        print(
            f"{args.items} items at {args.latency_ms:g} ms, run concurrency "
            f"{args.concurrency}, shards of {args.shard_size}, {os.cpu_count()} cores"
        )
        for count in [int(n) for n in args.workers.split(",") if n]:
            workers = start_workers(env, count, tmp)
            try:
                wait_registered(scratch, count)
                run_id = evalrun(env, data, base_url, args.concurrency)
                status, succeeded, total, wall = wait_end(scratch, run_id)
            finally:
                stop(workers)
            rate = succeeded / float(wall)
            limit = count * args.concurrency / (args.latency_ms / 1000)
            single = single or rate
            print(
                f"{count} worker(s): {status} {succeeded}/{total} in {wall:.2f} s, "
                f"{rate:,.0f} items/s (limit {limit:,.0f}, efficiency "
                f"{rate / limit:.2f}; {rate / (count * single):.2f} of {count} x one "
                f"worker's), load {os.getloadavg()[0]:.1f}"
            )
        if args.kill_items:
            kill_run(scratch, env, tmp, base_url, args)
    finally:
        fake.send_signal(signal.SIGTERM)
        fake.wait(10)
        scratch.drop()
        shutil.rmtree(tmp, ignore_errors=True)


def kill_run(
    scratch: Scratch,
    env: dict[str, str],
    tmp: Path,
    base_url: str,
    args: argparse.Namespace,
) -> None:
    data = tmp / "kill.jsonl"
    dataset(data, args.kill_items)
    workers = start_workers(env, 4, tmp)
    try:
        wait_registered(scratch, 4)
        run_id = evalrun(env, data, base_url, args.concurrency)
        while (
            scratch.query(f"SELECT succeeded FROM runs_run WHERE id = {run_id}")[0][0]
            < args.kill_items // 3
        ):
            time.sleep(0.2)
        workers[0].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        status, succeeded, total, wall = wait_end(scratch, run_id)
        ((results, distinct, claims, shards),) = scratch.query(
            "SELECT count(*), count(DISTINCT (item_id, epoch)), "
            f"(SELECT sum(claims) FROM runs_runshard WHERE run_id = {run_id}), "
            f"(SELECT count(*) FROM runs_runshard WHERE run_id = {run_id}) "
            f"FROM runs_result WHERE run_id = {run_id}"
        )
    finally:
        stop(workers)
    print(
        f"{args.kill_items} items over 4 workers, one SIGKILLed at a third: {status} "
        f"{succeeded}/{total}, {results} results ({distinct} distinct) in "
        f"{wall:.2f} s; ended {time.monotonic() - killed_at:.1f} s after the kill; "
        f"{claims} shard claims for {shards} shards; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()

"""The distributed mode's throughput, and a run that survives a killed worker.

Creates a scratch PostgreSQL database on ``DATABASE_URL``'s server (never the
database the URL names; dropped at the end), starts the fake model server with
a fixed latency and N ``evalworker`` processes, then times ``evalrun
--detach`` runs from the run's start to its end (the run's own wall time):

- the same items at ``--latency-ms`` with 1, 2 and 4 workers (``--workers``;
  ``1,2,4,8`` for eight too),
  each run of concurrency ``--concurrency`` per worker (a run's concurrency
  holds over all its workers: ``workers x concurrency`` in all); the limit
  is ``workers x concurrency / latency`` items a second;
- with ``--kill-items N``: an N-item run over 4 workers; once a third of its
  items have succeeded, the worker holding a shard with some but not all of
  its results stored (a quarter to three quarters, if one is seen within 5 s)
  is SIGKILLed. It prints what that worker held, when its
  shard was claimed again and the run ended, the claims, the calls the fake
  server received beyond N (its ``/v1/stats``: those the crash repeated),
  and checks the run: completed, one result per (item, epoch) (the rows
  against the distinct keys) and every item with one, counts adding up,
  the run's counts equal to its stored rows by status (no result counted
  that is not stored), each answer scored once; then the database's size.

``--demo`` runs the demo target at no latency in each worker instead of the
fake server (no calls: what the workers and the database can store), for
the throughput at no latency and a kill run of a million items;
``--kill-concurrency`` is the kill run's concurrency over its 4 workers.
Each line gives the CPU per item of the workers and of the database's
server processes (when the server is on this machine), and the load average.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/distributed.py
    ... bench/distributed.py --items 2000 --workers 1,2   # a quick try
    ... bench/distributed.py --workers "" --kill-items 20000   # the kill part only
    ... bench/distributed.py --items 20000 --workers 1,2,4,8
    ... bench/distributed.py --demo --items 100000 --workers 4   # no latency
    ... bench/distributed.py --demo --workers "" --kill-items 1000000 \
            --kill-concurrency 256 --shard-size 2000

Each worker is one process; on a machine with fewer cores than workers, the
figure says more about the cores than about the design: the load average is
printed with each line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import NamedTuple

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
ACTIVE_RUN = ("pending", "running")
COUNTS = ("succeeded", "failed", "timed_out", "cancelled")
MIDWAY_SECONDS = 5.0


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
    env.setdefault("EVALSITE_TARGET_ALLOW", "loopback")  # the fake server
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
                [PYTHON, "manage.py", "evalworker", "--shards", "1"],
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


# The offline demo target at no latency (--demo): answers at once, in the
# worker's own process, 80% right; no call fails.
DEMO = {
    "min_latency_ms": 0,
    "max_latency_ms": 0,
    "accuracy": 0.8,
    "transient_error_rate": 0,
}


def evalrun(env: dict[str, str], data: Path, base_url: str, concurrency: int) -> int:
    """Start a run (detached); ``base_url`` "" for the demo target."""
    target = (
        ("--base-url", base_url, "--model", "fake")
        if base_url
        else ("--target", "demo", "--target-config", json.dumps(DEMO))
    )
    out = manage(
        env,
        *("evalrun", str(data), "--detach", *target, "--scorer", "exact_match"),
        *("--concurrency", str(concurrency)),
    )
    return int(out.strip())


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a live process (/proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(scratch: Scratch) -> dict[int, float]:
    """CPU so far of each server process serving the scratch database (on
    this machine; none for a server elsewhere)."""
    found = {}
    for (pid,) in scratch.query(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()"
    ):
        with contextlib.suppress(FileNotFoundError, PermissionError, IndexError):
            found[pid] = cpu_seconds(pid)
    return found


class Cpu:
    """CPU the workers and the database's server processes use from now on
    (a server process that ends before ``used`` is left out)."""

    def __init__(self, scratch: Scratch, workers: list[subprocess.Popen]) -> None:
        self.scratch, self.workers = scratch, workers
        self.server = server_cpu(scratch)
        self.own = [cpu_seconds(w.pid) for w in workers]

    def used(self) -> tuple[float, float]:
        own = sum(
            cpu_seconds(w.pid) - before
            for w, before in zip(self.workers, self.own, strict=True)
            if w.poll() is None
        )
        server = sum(
            cpu - self.server.get(pid, 0.0)
            for pid, cpu in server_cpu(self.scratch).items()
        )
        return own, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--shard-size", type=int, default=500)
    parser.add_argument("--kill-items", type=int, default=0)
    parser.add_argument(
        "--kill-concurrency",
        type=int,
        help="the kill run's concurrency over its 4 workers (default: --concurrency)",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="the demo target at no latency, in each worker (not the fake server)",
    )
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
    run_url = "" if args.demo else base_url
    env = env_for(scratch, args.shard_size)
    try:
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "shell", "-c", "from django.contrib.auth import get_user_model; "
               "get_user_model().objects.create_user('bench')")  # fmt: skip
        data = tmp / "items.jsonl"
        dataset(data, args.items)
        single = None
        failed: list[str] = []
        counts = [int(n) for n in args.workers.split(",") if n]
        print(
            (f"{args.items} items " if counts else "")
            + ("of the demo target at no latency" if args.demo else
               f"at {args.latency_ms:g} ms")
            + f", run concurrency {args.concurrency} per worker, shards of "
            f"{args.shard_size}, {os.cpu_count()} cores"
        )  # fmt: skip
        for count in counts:
            workers = start_workers(env, count, tmp)
            try:
                wait_registered(scratch, count)
                load_before = os.getloadavg()[0]
                cpu = Cpu(scratch, workers)
                run_id = evalrun(env, data, run_url, count * args.concurrency)
                status, succeeded, total, wall = wait_end(scratch, run_id)
                own_cpu, db_cpu = cpu.used()
            finally:
                stop(workers)
            rate = succeeded / float(wall)
            single = single or rate
            limit = (
                f"limit {count * args.concurrency / (args.latency_ms / 1000):,.0f}"
                if run_url and args.latency_ms
                else "no latency"
            )
            print(
                f"{count} worker(s): {status} {succeeded}/{total} in {wall:.2f} s, "
                f"{rate:,.0f} items/s ({limit}; {rate / (count * single):.2f} of "
                f"{count} x one worker's); CPU per item {1000 * own_cpu / total:.3f} "
                f"ms workers + {1000 * db_cpu / total:.3f} ms database; load "
                f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
            )
        if args.kill_items:
            failed = kill_run(scratch, env, tmp, base_url, args)
            print(
                "database: "
                + ", ".join(
                    f"{name} {size / 2**20:,.0f} MiB"
                    for name, size in scratch.query(
                        "SELECT 'all', pg_database_size(current_database()) UNION ALL "
                        "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
                        "WHERE relname IN ('runs_result', 'runs_score', 'runs_item')"
                    )
                )
            )
    finally:
        fake.send_signal(signal.SIGTERM)
        fake.wait(10)
        scratch.drop()
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        sys.exit(1)


class Shard(NamedTuple):
    id: int
    worker: str  # the executor id "host:pid:token" of the process holding it
    start: int
    stop: int
    status: str
    claims: int
    stored: int  # its results stored so far

    @property
    def pid(self) -> int | None:
        return int(self.worker.rsplit(":", 2)[-2]) if self.worker else None


def shards(scratch: Scratch, run_id: int, where: str) -> list[Shard]:
    return [
        Shard(*row)
        for row in scratch.query(
            "SELECT s.id, s.worker, s.start, s.stop, s.status, s.claims, "
            "(SELECT count(*) FROM runs_result r WHERE r.run_id = s.run_id "
            "AND r.item_index >= s.start AND r.item_index < s.stop) "
            f"FROM runs_runshard s WHERE s.run_id = {run_id} AND {where}"
        )
    ]


def half_done_shard(scratch: Scratch, run_id: int, pids: set[int]) -> Shard | None:
    """A running shard of one of our workers with some but not all of its
    results stored, the nearest to half done (the least likely to end before
    the kill lands)."""
    held = [
        shard
        for shard in shards(scratch, run_id, "s.status = 'running'")
        if 0 < shard.stored < shard.stop - shard.start and shard.pid in pids
    ]
    return min(
        held,
        key=lambda shard: abs(2 * shard.stored - (shard.stop - shard.start)),
        default=None,
    )


def fake_calls(base_url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{base_url}/stats", timeout=10) as answer:
        return json.load(answer)


def kill_run(
    scratch: Scratch,
    env: dict[str, str],
    tmp: Path,
    base_url: str,
    args: argparse.Namespace,
) -> list[str]:
    """The kill part; returns the checks that failed."""
    items = args.kill_items
    data = tmp / "kill.jsonl"
    dataset(data, items)
    url = "" if args.demo else base_url  # the demo target makes no calls
    workers = start_workers(env, 4, tmp)
    try:
        wait_registered(scratch, 4)
        calls_before = fake_calls(base_url) if url else {}
        load_before = os.getloadavg()[0]
        cpu = Cpu(scratch, workers)
        run_id = evalrun(env, data, url, args.kill_concurrency or args.concurrency)
        run_row = f"FROM runs_run WHERE id = {run_id}"
        while scratch.query(f"SELECT succeeded {run_row}")[0][0] < items // 3:
            time.sleep(0.2)
        # The worker to kill holds a shard mid-way; between two shards (or
        # with its next job fetched but not claimed) a kill shows no takeover.
        # A quarter to three quarters stored is preferred for a few seconds:
        # results are stored a flush behind the calls, so a shard nearly all
        # stored has made its calls, and the kill would repeat few of them.
        by_pid = {worker.pid: worker for worker in workers}
        looks, since = 0, time.monotonic()
        while True:
            looks += 1
            target = half_done_shard(scratch, run_id, set(by_pid))
            if target is not None and (
                time.monotonic() - since > MIDWAY_SECONDS
                or 1 / 4 <= target.stored / (target.stop - target.start) <= 3 / 4
            ):
                break
            if scratch.query(f"SELECT status {run_row}")[0][0] not in ACTIVE_RUN:
                raise RuntimeError("the run ended before a shard was seen mid-way")
            time.sleep(0.05)
        looked = time.monotonic() - since
        victim = by_pid[target.pid]
        victim.send_signal(signal.SIGKILL)
        killed_at = time.time()
        victim.wait(10)
        load_at_kill = os.getloadavg()[0]
        # Read once the worker is dead: what it held at the kill.
        (held,) = shards(scratch, run_id, f"s.id = {target.id}")
        succeeded_at_kill = scratch.query(f"SELECT succeeded {run_row}")[0][0]
        reclaimed_after = None
        while True:
            ((run_status, claims),) = scratch.query(
                "SELECT status, (SELECT claims FROM runs_runshard "
                f"WHERE id = {held.id}) {run_row}"
            )
            if reclaimed_after is None and claims > held.claims:
                reclaimed_after = time.time() - killed_at
            if run_status not in ACTIVE_RUN:
                break
            time.sleep(0.1)
        own_cpu, db_cpu = cpu.used()  # the killed worker's left out
        calls_after = fake_calls(base_url) if url else {}
        ((run_status, total, *counts, ended_at, wall),) = scratch.query(
            f"SELECT status, total, {', '.join(COUNTS)}, "
            "EXTRACT(EPOCH FROM finished_at), "
            f"EXTRACT(EPOCH FROM finished_at - started_at) {run_row}"
        )
        ((results, distinct, items_stored, attempts),) = scratch.query(
            "SELECT count(*), count(DISTINCT (item_id, epoch)), "
            "count(DISTINCT item_id), sum(jsonb_array_length(attempts)) "
            f"FROM runs_result WHERE run_id = {run_id}"
        )
        # exact_match scores each answer once (a result with an error has
        # no score).
        ((scores, scored, answered),) = scratch.query(
            "SELECT count(s.id), count(DISTINCT s.result_id), (SELECT count(*) "
            f"FROM runs_result WHERE run_id = {run_id} AND status = 'succeeded') "
            "FROM runs_score s JOIN runs_result r ON r.id = s.result_id "
            f"WHERE r.run_id = {run_id}"
        )
        by_status = dict(
            scratch.query(
                "SELECT status, count(*) FROM runs_result "
                f"WHERE run_id = {run_id} GROUP BY status"
            )
        )
        ((all_claims, shard_count),) = scratch.query(
            f"SELECT sum(claims), count(*) FROM runs_runshard WHERE run_id = {run_id}"
        )
        (after,) = shards(scratch, run_id, f"s.id = {held.id}")
    finally:
        stop(workers)

    ended_after = float(ended_at) - killed_at
    skipped = total - sum(counts)
    stored_counts = [by_status.get(key, 0) for key in COUNTS]
    mid_way = held.status == "running" and held.pid == victim.pid
    size = held.stop - held.start
    print(
        f"{items} items over 4 workers, one SIGKILLed at a third "
        f"({succeeded_at_kill} succeeded), found on look {looks} ({looked:.1f} s): "
        f"pid {victim.pid} "
        + (
            f"held shard {held.id} (items {held.start}-{held.stop - 1}, claim "
            f"{held.claims}), {held.stored} of its {size} results stored"
            if mid_way
            else f"no longer held shard {held.id} ({held.status}, pid {held.pid})"
        )
        + f"; load {load_at_kill:.1f}"
    )
    print(
        f"shard {held.id} claimed again "
        + ("never" if reclaimed_after is None else f"{reclaimed_after:.1f} s after")
        + f" the kill; now {after.status}, {after.claims} claims, by pid "
        f"{after.pid}; the run ended {ended_after:.1f} s after the kill"
    )
    print(
        f"{run_status} {counts[0]}/{total} in {float(wall):.2f} s "
        f"({total / float(wall):,.0f} items/s; load {load_before:.1f} before); "
        f"{results} results, {distinct} distinct (item, epoch), {items_stored} "
        f"items; succeeded+failed+timed_out+cancelled+skipped = "
        f"{'+'.join(map(str, [*counts, skipped]))} = {total}; stored by status "
        f"{'+'.join(map(str, stored_counts))}; {scores} scores of {scored} "
        f"results, {answered} answered"
    )
    print(
        f"CPU per item {1000 * own_cpu / total:.3f} ms in the 3 workers left "
        f"+ {1000 * db_cpu / total:.3f} ms database"
    )
    print(f"{all_claims} shard claims for {shard_count} shards")
    if url:
        # A call whose result was never stored was made by the killed worker:
        # it was in flight (its connection closed by the kill) or answered and
        # waiting in the writer's buffer.
        calls = calls_after["requests"] - calls_before["requests"]
        closed = calls_after["disconnects"] - calls_before["disconnects"]
        lost = calls - attempts
        print(
            f"the fake server received {calls} calls, {calls - items} beyond "
            f"{items}; {attempts} attempts stored, so {lost} calls lost with the "
            f"killed worker: {closed} in flight (closed by the kill), "
            f"{lost - closed} answered but not stored"
        )
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    checks = {
        "the run completed": run_status == "completed",
        f"{items} results, one per (item, epoch)": results == distinct == items,
        "every item has its result": items_stored == items,
        "each answer scored once": scores == scored == answered,
        "total is the items": total == items,
        "succeeded+failed+timed_out+cancelled == total": sum(counts) == total,
        "the run's counts are its stored rows": stored_counts == counts,
        "the killed worker held a shard mid-way": mid_way,
        "its shard was claimed again and done": after.claims == held.claims + 1
        and after.status == "done",
        "one claim more than shards": all_claims == shard_count + 1,
    }
    failed = [name for name, ok in checks.items() if not ok]
    for name in failed:
        print(f"check failed: {name}")
    return failed


if __name__ == "__main__":
    main()

"""CPU per item of the executor beyond start-up, measured in one process.

On a scratch database (``analysis_bench.run_in_scratch``: a temporary SQLite
file, or with ``DATABASE_URL`` a scratch PostgreSQL database), this process
sets Django up once, imports an arithmetic dataset and runs it with
``execute_run``, as ``evalrun`` does, twice: a warm-up run of ``--warm``
items (imports made on first use, connections, compiled statements), then the
measured run of ``--items`` items. The CPU of the process (every thread: the
event loop and the database thread) is read with ``getrusage`` around the
measured run only, so start-up, the dataset import and the final report are
not in it; the run's own end (its recount and stored figures) is.

Targets: ``demo`` at no latency (an endpoint that answers at once, in
process: what is left is the executor), or ``openai_chat`` against the fake
server in its own process (``--latency-ms``; its CPU is not in the figure).

    .venv/bin/python bench/cpu_per_item.py                        # demo, 20,000 items
    .venv/bin/python bench/cpu_per_item.py --target openai_chat
    .venv/bin/python bench/cpu_per_item.py --target openai_chat \\
        --concurrency 1024 --latency-ms 1000 --items 20000
    .venv/bin/python bench/cpu_per_item.py --profile run.prof     # cProfile
    .venv/bin/python bench/cpu_per_item.py --source /tmp/before   # older code

For where the time goes with little overhead, run it under py-spy
(``py-spy record --format raw --threads -o stacks.txt -- .venv/bin/python
bench/cpu_per_item.py ...``) and sum the stacks of the measured run by part
with ``bench/where_time_goes.py stacks.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import random
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_bench import run_in_scratch
from harness import ROOT, free_port
from layout import imported


def dataset_text(count: int) -> str:
    rng = random.Random(0)
    lines = []
    for i in range(count):
        a, b = rng.randrange(1000), rng.randrange(1000)
        row = {"id": f"q{i}", "input": f"What is {a} + {b}?", "expected": str(a + b)}
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def fake_server(
    latency_ms: float, source: str | None
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "runs.testing.fake_openai"),
            *("--port", str(port), "--latency-ms", str(latency_ms)),
        ],
        cwd=source or ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180  # a loaded machine starts it slowly
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise SystemExit("the fake server did not start") from None
            time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}/v1"


def as_evalrun(main: Any) -> Any:
    """Run ``main`` on the loop the measured code's ``evalrun`` uses: its
    ``runs.pools.loops.run`` (uvloop's) where it has one, else asyncio's."""
    try:
        from runs.pools.loops import run
    except ImportError:
        return asyncio.run(main)
    return run(main)


def measured_run(run_id: int) -> Any:
    # A function of its own: py-spy's stacks of the measured run pass here.
    from runs.executor.engine import execute_run

    return as_evalrun(execute_run(run_id))


def bench(args: argparse.Namespace) -> None:
    os.environ["EVALSITE_TARGET_ALLOW"] = "loopback,public"
    if args.source:
        # Another checkout's code (an export of an older commit) measured by
        # this script: before and after, alike.
        sys.path.insert(0, str(Path(args.source).resolve()))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--no-input", "-v", "0")
    import runs
    from runs.executor.engine import execute_run
    from runs.models import Project

    dataset_import = imported("dataset_import")
    run_create = imported("run_create")

    project = Project.objects.create(name="CPU per item")
    server = None
    if args.target == "openai_chat":
        server, base_url = fake_server(args.latency_ms, args.source)
        config: dict[str, Any] = {"base_url": base_url, "model": "bench"}
    else:
        config = {
            "min_latency_ms": args.latency_ms,
            "max_latency_ms": args.latency_ms,
            "accuracy": 0.8,
            "transient_error_rate": 0.01,
        }

    def one(
        items: int, name: str, profile: cProfile.Profile | None = None
    ) -> dict[str, Any]:
        dataset = dataset_import(
            project=project,
            user=None,
            name=name,
            content=dataset_text(items),
            format="jsonl",
            filename=f"{name}.jsonl",
        )
        run = run_create(
            user=None,
            dataset=dataset,
            target_kind=args.target,
            target_config=config,
            scorers=["exact_match"],
            options={"concurrency": args.concurrency, "max_attempts": 1},
            launch=False,
        )
        before, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if profile is not None:
            profile.enable()
        if name == "measured":
            status = measured_run(run.pk)
        else:
            status = as_evalrun(execute_run(run.pk))
        if profile is not None:
            profile.disable()
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        run.refresh_from_db()
        user = after.ru_utime - before.ru_utime
        system = after.ru_stime - before.ru_stime
        return {
            "status": str(status),
            "items": items,
            "stored": run.processed,
            "cpu_s": round(user + system, 3),
            "user_s": round(user, 3),
            "system_s": round(system, 3),
            "wall_s": round(wall - began, 3),
        }

    try:
        warm = one(args.warm, "warm-up")
        profile = cProfile.Profile() if args.profile else None
        run = one(args.items, "measured", profile)
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    if profile is not None:
        profile.dump_stats(args.profile)
    figures = {
        "target": args.target,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "database": args.label,
        "code": str(Path(runs.__file__).resolve().parent.parent),
        "warm_up": warm,
        "run": run,
        "cpu_ms_per_item": round(1000 * run["cpu_s"] / run["items"], 4),
        "items_per_cpu_second": round(run["items"] / run["cpu_s"]),
        "items_per_second": round(run["items"] / run["wall_s"]),
        "load_average": round(os.getloadavg()[0], 2),
    }
    print(
        f"{args.target}, {run['items']:,} items, concurrency {args.concurrency}, "
        f"{args.latency_ms:g} ms: {figures['cpu_ms_per_item']} ms of CPU per item "
        f"(user {run['user_s']} s, system {run['system_s']} s), "
        f"{figures['items_per_cpu_second']:,} items per CPU second, "
        f"{figures['items_per_second']:,} items/s over {run['wall_s']} s; "
        f"{run['stored']:,} stored, {run['status']}; code in {figures['code']}; "
        f"load average {figures['load_average']}"
    )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--warm", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--target", choices=["demo", "openai_chat"], default="demo")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--profile", help="write a cProfile of the measured run here")
    parser.add_argument("--json-out")
    parser.add_argument("--source", help="measure another checkout's code")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    run_in_scratch(bench, args)


if __name__ == "__main__":
    main()

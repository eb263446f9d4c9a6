"""A run against an endpoint that answers one request at a time, as a local
model server with one slot does: with a fixed concurrency, and with
concurrency adapted to the endpoint's latency and timeouts.

The fake OpenAI server (``--one-at-a-time``) serves each request in
``--service-ms``; the others wait their turn, so a call's latency grows with
the calls in flight. Each mode runs the same items on a fresh SQLite database
in a temporary directory, in this process, and prints the median latency of
the attempts, the attempts that timed out, the items stored a second, and the
calls the executor allowed at once when it ended.

"fixed" is adaptive concurrency switched off; it is also what adaptive
concurrency did on this endpoint when it reacted to 429s alone (it sends
none).

    .venv/bin/python bench/saturation.py
    .venv/bin/python bench/saturation.py --items 100 --service-ms 100 --timeout 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def setup(data_dir: Path) -> None:
    sys.path.insert(0, str(ROOT))
    for name in ("DATABASE_URL", "REDIS_URL", "EVALSITE_EXECUTOR"):
        os.environ.pop(name, None)  # embedded: SQLite in the data directory
    os.environ["EVALSITE_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("EVALSITE_TARGET_ALLOW", "loopback")  # the fake server
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def measure(base_url: str, args: argparse.Namespace, *, adaptive: bool) -> dict:
    from runs.executor.engine import Execution, execute_run
    from runs.models import Project, Result
    from runs.results.services import run_create
    from tests.factories import arithmetic_items, make_dataset

    project, _ = Project.objects.get_or_create(name="bench")
    run = run_create(
        user=None,
        dataset=make_dataset(
            project, arithmetic_items(args.items), name=f"arith-{adaptive}"
        ),
        target_kind="openai_chat",
        target_config={"base_url": base_url, "model": "bench"},
        scorers=["exact_match"],
        options={
            "concurrency": args.concurrency,
            "timeout_seconds": args.timeout,
            "max_attempts": args.max_attempts,
            "backoff_base_seconds": 0.1,
            "backoff_max_seconds": 0.5,
            "adaptive_concurrency": adaptive,
        },
        launch=False,
    )
    executions: list[Execution] = []
    began = time.monotonic()
    asyncio.run(execute_run(run.pk, on_start=executions.append))
    wall = time.monotonic() - began
    attempts = [
        attempt
        for log in Result.objects.filter(run=run).values_list("attempts", flat=True)
        for attempt in log
    ]
    latencies = [a["latency_ms"] / 1000 for a in attempts if "latency_ms" in a]
    timeouts = sum(a.get("outcome") == "timeout" for a in attempts)
    succeeded = Result.objects.filter(run=run, status="succeeded").count()
    runner = executions[0].runner if executions else None
    return {
        "p50": statistics.median(latencies) if latencies else None,
        "attempts": len(attempts),
        "timeouts": timeouts,
        "succeeded": succeeded,
        "per_second": succeeded / wall,
        "wall": wall,
        "limit": runner.concurrency.limit if runner else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--service-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=1.5, help="per attempt, s")
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--modes", default="fixed,adaptive")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="evalsite-bench-saturation-"))
    try:
        setup(data_dir)
        from runs.testing.fake_openai import FakeOpenAIServer

        print(
            f"{args.items} items, an endpoint that answers one request at a time "
            f"in {args.service_ms:g} ms, concurrency {args.concurrency}, timeout "
            f"{args.timeout:g} s, up to {args.max_attempts} attempts"
        )
        for mode in args.modes.split(","):
            server = FakeOpenAIServer(latency_ms=args.service_ms, one_at_a_time=True)
            server.start()
            try:
                figures: dict[str, Any] = measure(
                    server.base_url, args, adaptive=mode == "adaptive"
                )
            finally:
                server.stop()
            share = figures["timeouts"] / max(figures["attempts"], 1)
            print(
                f"{mode:>9}: p50 latency {figures['p50']:.2f} s, "
                f"{figures['timeouts']} of {figures['attempts']} attempts timed out "
                f"({share:.0%}), {figures['succeeded']}/{args.items} succeeded, "
                f"{figures['per_second']:.2f} items/s ({figures['wall']:.1f} s), "
                f"{figures['limit']} calls at once at the end; "
                f"the server held at most {server.stats.max_in_flight} at once"
            )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

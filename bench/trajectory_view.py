"""Server time of the trajectory viewer: a 5,000-step trajectory and a 10-way diff.

Seeds a scratch database as ``analysis_bench.py`` does (a temporary SQLite
file, or with ``DATABASE_URL`` a scratch PostgreSQL database, dropped at the
end) with one dataset and ``--runs`` runs of it, each with a result for the
first item whose trajectory has ``--steps`` steps (model calls with their
messages, tool calls with arguments and results; every run's a little
different: a changed argument, an extra call), then times in-process, best
of ``--repeat``, caches cleared before each call:

- the result page of a ``--steps``-step trajectory (its first page of 200
  steps, and the figures over all of them), and its last page;
- ``GET /api/v1/results/{id}/trajectory`` (first page);
- the diff page and ``GET /api/v1/trajectories/diff`` of the item over all
  the runs.

    .venv/bin/python bench/trajectory_view.py [--steps 5000] [--runs 10]
    DATABASE_URL=postgres://... .venv/bin/python bench/trajectory_view.py

Goals: the trajectory under 0.3 s, the 10-way diff under 0.5 s, held to
the CPU time of the request (the wall time is printed too: on a loaded
machine it is the larger). ``--profile N`` then prints where the CPU time
of the result page and of the diff page goes (cProfile on this process's
CPU clock: the project's N costliest functions by cumulative time, and any
N by their own time; the profiler's own overhead, several times the
request's time, weighs most on functions called very often).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time
from typing import Any

from analysis_bench import run_in_scratch

VIEW_GOAL = 0.3
DIFF_GOAL = 0.5


def trajectory(steps: int, variant: int) -> list[dict[str, Any]]:
    """A tool-using agent's steps: a model call, then one or two tool calls."""
    rng = random.Random(variant)
    rows: list[dict[str, Any]] = []
    turn = 0
    while len(rows) < steps:
        history = [{"role": "user", "content": "Find the answer. " * 20}]
        history += [
            {"role": "tool", "tool_call_id": f"c{turn - 1}", "content": "r" * 200}
        ]
        rows.append(
            {
                "kind": "model",
                "name": "gpt-bench",
                "arguments": history,
                "output": {"role": "assistant", "tool_calls": [{"id": f"c{turn}"}]},
                "prompt_tokens": 400 + turn,
                "completion_tokens": 30,
                "cost": 0.0004,
                "latency_ms": 300.0,
            }
        )
        page = turn + (1 if variant and rng.random() < 0.02 else 0)
        rows.append(
            {
                "kind": "tool",
                "name": "search" if turn % 3 else "fetch",
                "arguments": {"query": f"topic {turn % 50}", "page": page},
                "output": {"hits": [f"hit {n} " * 8 for n in range(5)]},
                "call_id": f"c{turn}",
                "latency_ms": 20.0,
                "error": "HTTP 500" if turn % 97 == 5 else "",
            }
        )
        if variant and rng.random() < 0.01:
            rows.append({"kind": "tool", "name": "extra", "arguments": {"n": turn}})
        turn += 1
    return rows[:steps]


def store(result: Any, steps: list[dict[str, Any]]) -> None:
    from runs.models import Step
    from runs.plugins.steps import bounded, call_hash

    rows = []
    for index, fields in enumerate(steps):
        fields = dict(fields)
        arguments, arguments_bytes = bounded(fields.pop("arguments", None))
        output, output_bytes = bounded(fields.pop("output", None))
        if fields["kind"] == "tool":
            fields["call_hash"] = call_hash(fields["name"], arguments)
        rows.append(
            Step(
                result=result,
                index=index,
                arguments=arguments,
                output=output,
                arguments_bytes=arguments_bytes,
                output_bytes=output_bytes,
                **fields,
            )
        )
    Step.objects.bulk_create(rows, batch_size=1000)


def seed(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from runs.executor.store import ResultRecord, results_write
    from runs.models import Dataset, Item, Membership, Project, Result
    from runs.results.services import run_create

    user = User.objects.create_user("bench")
    project = Project.objects.create(name="Bench")
    Membership.objects.create(project=project, user=user, role="admin")
    dataset = Dataset.objects.create(
        project=project, name="agent", version=1, content_hash="x", item_count=1
    )
    item = Item.objects.create(dataset=dataset, index=0, external_id="a", input="q")
    runs = []
    for number in range(args.runs):
        run = run_create(
            user=user,
            dataset=dataset,
            target_kind="python",
            target_config={"callable": "runs.targets.examples.echo"},
            scorers=[{"kind": "max_steps", "params": {"max_steps": 100}}],
            name=f"agent {number}",
            launch=False,
        )
        now = timezone.now()
        record = ResultRecord(
            item_id=item.pk,
            item_index=0,
            epoch=0,
            status="succeeded",
            output="answer",
            attempts=[{"number": 1, "outcome": "ok"}],
            started_at=now,
            finished_at=now,
        )
        results_write(run.pk, [record])
        store(Result.objects.get(run=run), trajectory(args.steps, number))
        runs.append(run)
    return user, runs


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    django.setup()
    call_command("migrate", verbosity=0)
    from runs.models import Result

    begin = time.perf_counter()
    user, runs = seed(args)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(
        f"seeded {len(runs)} trajectories of {args.steps:,} steps in "
        f"{time.perf_counter() - begin:.1f} s"
    )
    client = Client()
    client.force_login(user)
    first = Result.objects.get(run=runs[0])
    page = f"/runs/{runs[0].pk}/results/{first.pk}/"
    last = (args.steps + 199) // 200
    ids = ",".join(str(r.pk) for r in runs)
    diff = f"?item={first.item_id}&runs={ids}"
    print(f"\n{args.label}")
    api = f"/api/v1/results/{first.pk}/trajectory"
    print(f"{'what':34} {'wall s':>7} {'cpu s':>7} {'goal s':>7} {'bytes':>10}  result")
    for label, url, goal in (
        (f"result page, {args.steps} steps", page, VIEW_GOAL),
        ("result page, last page of steps", f"{page}?steps={last}", VIEW_GOAL),
        ("trajectory API, first page", api, VIEW_GOAL),
        (f"{len(runs)}-way diff page", f"/trajectories/diff/{diff}", DIFF_GOAL),
        (f"{len(runs)}-way diff API", f"/api/v1/trajectories/diff{diff}", DIFF_GOAL),
    ):
        wall, cpu, size, status = measure(client, url, args.repeat)
        verdict = f"HTTP {status}" if status != 200 else "ok" if cpu <= goal else "over"
        print(f"{label:34} {wall:7.3f} {cpu:7.3f} {goal:7.1f} {size:10,}  {verdict}")
    if args.profile:
        for url in (page, f"/trajectories/diff/{diff}"):
            profile(client, url, args.profile)


def measure(client: Any, url: str, repeat: int) -> tuple[float, float, int, int]:
    """Best wall time and best CPU time of this process over ``repeat`` GETs,
    caches cleared before each (CPU time: what the request costs, however
    loaded the machine is)."""
    from django.core.cache import caches

    walls, cpus = [], []
    size = status = 0
    for _ in range(repeat):
        for cache in caches.all():
            cache.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        size, status = len(response.content), response.status_code
    return min(walls), min(cpus), size, status


def profile(client: Any, url: str, rows: int) -> None:
    """Where one GET of ``url`` spends its CPU time, caches cleared before."""
    from django.core.cache import caches

    for cache in caches.all():
        cache.clear()
    profiler = cProfile.Profile(time.process_time)
    profiler.runcall(client.get, url)
    stats = pstats.Stats(profiler)
    print(f"\nCPU profile of {url}: the project's functions by cumulative time")
    stats.sort_stats("cumulative").print_stats(r"/runs/", rows)
    print(f"CPU profile of {url}: any function by its own time")
    stats.sort_stats("tottime").print_stats(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N",
        help="print the N costliest functions of the result and diff pages",
    )  # fmt: skip
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()

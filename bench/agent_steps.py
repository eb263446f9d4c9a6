"""Trajectories stored: steps per second through the executor's writer, and
the bytes each step takes in the database.

In a scratch database (as ``analysis_bench.py`` makes one: a temporary SQLite
file, or with ``DATABASE_URL`` a scratch PostgreSQL database, dropped at the
end), stores ``--items`` results of ``--steps`` steps each through
``store.results_write`` in batches of ``--batch`` (as the executor does: one
transaction per batch, results, scores and steps together), once without
steps and once with, and prints:

- steps stored per second (the time the steps add, over the steps);
- bytes per step on disk (the step table and its indexes, over the steps);
- with ``--end-to-end``, an agent run of ``--run-items`` items against the
  fake model server (three tools: two Python callables and the final answer)
  in this process: its steps stored per second, start to end.

    .venv/bin/python bench/agent_steps.py [--items 5000] [--steps 20]
    DATABASE_URL=postgres://... .venv/bin/python bench/agent_steps.py

The steps are those of an agent's loop: a model call (its new messages, the
reply with a tool call, tokens), then the tool call (arguments, a result of
about a kilobyte), in turn; one payload in twenty is over the bound and cut.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from datetime import UTC, datetime
from typing import Any

from analysis_bench import run_in_scratch

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def agent_steps(rng: random.Random, count: int) -> list[Any]:
    from runs.models.steps import STEP_PAYLOAD_BYTES
    from runs.plugins.steps import Step

    steps = []
    for number in range(count):
        if number % 2 == 0:
            steps.append(
                Step(
                    kind="model",
                    name="gpt-4o-mini",
                    arguments=[
                        {"role": "tool", "content": "r" * rng.randint(200, 800)}
                    ],
                    output={
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{number}",
                                "type": "function",
                                "function": {
                                    "name": "search",
                                    "arguments": '{"query": "what is it"}',
                                },
                            }
                        ],
                    },
                    latency_ms=rng.uniform(200, 900),
                    prompt_tokens=rng.randint(300, 3000),
                    completion_tokens=rng.randint(10, 60),
                )
            )
        else:
            big = rng.random() < 0.05
            size = STEP_PAYLOAD_BYTES * 3 if big else rng.randint(500, 1500)
            steps.append(
                Step(
                    kind="tool",
                    name=rng.choice(["search", "lookup", "run_code"]),
                    arguments={"query": f"question {rng.randint(0, 99)}"},
                    output={"text": "x" * size},
                    call_id=f"call_{number - 1}",
                    latency_ms=rng.uniform(5, 300),
                )
            )
    return steps


def write(
    run_id: int, items: list[Any], args: argparse.Namespace, steps: bool
) -> float:
    from runs.executor import store
    from runs.executor.store import ResultRecord

    rng = random.Random(7)
    seconds = 0.0
    for start in range(0, len(items), args.batch):
        batch = [
            ResultRecord(
                item_id=item.pk,
                item_index=item.index,
                epoch=0,
                status="succeeded",
                output="answer",
                attempts=[{"number": 1, "outcome": "ok"}],
                started_at=T0,
                finished_at=T0,
                steps=agent_steps(rng, args.steps) if steps else None,
            )
            for item in items[start : start + args.batch]
        ]
        began = time.perf_counter()
        store.results_write(run_id, batch)
        seconds += time.perf_counter() - began
    return seconds


def step_table_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_total_relation_size('runs_step')")
            return int(cursor.fetchone()[0])
        cursor.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'runs_step'")
        names = [row[0] for row in cursor.fetchall()]
        marks = ", ".join(["%s"] * len(names))
        cursor.execute(f"SELECT SUM(pgsize) FROM dbstat WHERE name IN ({marks})", names)
        return int(cursor.fetchone()[0] or 0)


def new_run(user: Any, items: int, name: str) -> Any:
    from runs.models import Project
    from runs.results.services import run_create
    from tests.factories import arithmetic_items, make_dataset

    project, _ = Project.objects.get_or_create(name="bench")
    dataset = make_dataset(project, arithmetic_items(items), name=name)
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        launch=False,
    )


def storage(args: argparse.Namespace) -> None:
    from runs.models import Item, Step

    plain = new_run(None, args.items, "plain")
    with_steps = new_run(None, args.items, "steps")
    items = {
        run.pk: list(Item.objects.filter(dataset=run.dataset).order_by("index"))
        for run in (plain, with_steps)
    }
    base = write(plain.pk, items[plain.pk], args, steps=False)
    total = write(with_steps.pk, items[with_steps.pk], args, steps=True)
    count = Step.objects.count()
    size = step_table_bytes()
    print(f"{args.label}: {args.items:,} results of {args.steps} steps")
    print(f"  results alone:     {args.items / base:,.0f} results/s")
    print(f"  results and steps: {args.items / total:,.0f} results/s")
    print(f"  steps stored:      {count / max(total - base, 1e-9):,.0f} steps/s")
    print(f"  bytes per step:    {size / count:,.0f} (table and indexes)")


def end_to_end(args: argparse.Namespace) -> None:
    from runs.executor.engine import execute_run
    from runs.models import Project, Run, Step
    from runs.results.services import run_create
    from runs.testing.fake_openai import FakeOpenAIServer
    from tests.factories import make_dataset

    server = FakeOpenAIServer(agent=True)
    server.start()
    numbers = {"type": "object", "properties": {"a": {}, "b": {}}}
    tools = [
        {
            "kind": "python",
            "name": "add",
            "params": {"callable": "runs.tools.examples.add", "parameters": numbers},
        },
        {
            "kind": "python",
            "name": "lookup",
            "params": {
                "callable": "runs.tools.examples.lookup",
                "parameters": {"type": "object", "properties": {"query": {}}},
            },
        },
        {"kind": "final_answer", "name": "final_answer"},
    ]
    project, _ = Project.objects.get_or_create(name="bench")
    rows = [
        {"input": f"What is {n} + 2? [[agent_rounds:4]]", "expected": str(n + 2)}
        for n in range(args.run_items)
    ]
    run = run_create(
        user=None,
        dataset=make_dataset(project, rows, name="agent"),
        target_kind="agent",
        target_config={"base_url": server.base_url, "model": "fake", "tools": tools},
        scorers=["exact_match"],
        options={"concurrency": 64},
        launch=False,
    )
    began = time.perf_counter()
    status = asyncio.run(execute_run(run.pk))
    seconds = time.perf_counter() - began
    server.stop()
    steps = Step.objects.filter(result__run=run).count()
    run = Run.objects.get(pk=run.pk)
    print(
        f"  agent run: {args.run_items:,} items, {steps:,} steps, {status} in "
        f"{seconds:.2f} s: {steps / seconds:,.0f} steps/s end to end "
        f"({run.succeeded} succeeded)"
    )


def bench(args: argparse.Namespace) -> None:
    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    settings.EVALSITE_TARGET_ALLOW = ["loopback"]
    call_command("migrate", verbosity=0)
    storage(args)
    if args.end_to_end:
        end_to_end(args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--run-items", type=int, default=500)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    run_in_scratch(bench, parser.parse_args())


if __name__ == "__main__":
    main()

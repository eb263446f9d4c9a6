"""Seed a freshly migrated database for the HTTP benchmark (bench/http_bench.py).

Run with the project directory as the working directory and EVALSITE_DATA_DIR
set; prints one JSON line: the user's credentials, a bearer key and the id of
the run whose page is measured. Everything goes through the project's own
services, importers and executor (the offline ``demo`` target).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from typing import Any

USERNAME = "bench"
PASSWORD = "bench-password-not-secret"


def arithmetic_items(count: int, *, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items = []
    for n in range(count):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        items.append(
            {"id": f"q{n:04d}", "input": f"What is {a} + {b}?", "expected": str(a + b)}
        )
    return items


def seed(*, results: int, runs: int) -> dict[str, Any]:
    from django.apps import apps
    from django.contrib.auth.models import User

    from runs.datasets import importers
    from runs.executor.engine import execute_run
    from runs.projects.services import api_key_create, project_create
    from runs.results.services import run_create
    from runs.targets.services import target_create

    user = User.objects.create_user(USERNAME, "bench@example.org", PASSWORD)
    project = project_create(name="Benchmark", owner=user)
    _key, plain = api_key_create(user=user, name="bench")
    target = target_create(
        project=project,
        user=user,
        name="Demo model (instant)",
        kind="demo",
        config={
            "min_latency_ms": 0,
            "max_latency_ms": 0,
            "accuracy": 0.8,
            "transient_error_rate": 0.0,
        },
    )
    scorers = [{"kind": "exact_match"}, {"kind": "includes"}]
    big = importers.dataset_create_from_items(
        project=project,
        user=user,
        name="arithmetic",
        items=arithmetic_items(results, seed=0),
    )
    small = importers.dataset_create_from_items(
        project=project, user=user, name="smoke", items=arithmetic_items(10, seed=1)
    )
    measured = run_create(
        user=user,
        dataset=big,
        target=target,
        scorers=scorers,
        name="measured run",
        launch=False,
    )
    others = [
        run_create(
            user=user,
            dataset=small,
            target=target,
            scorers=scorers,
            name=f"smoke {n}",
            launch=False,
        )
        for n in range(max(runs - 1, 0))
    ]

    async def execute_all() -> None:
        for run in [measured, *others]:
            await execute_run(run.pk)

    asyncio.run(execute_all())
    measured.refresh_from_db()
    return {
        "username": USERNAME,
        "password": PASSWORD,
        "api_key": plain,
        "run_id": measured.pk,
        "run_status": measured.status,
        "results": measured.processed,
        "runs": 1 + len(others),
        "code": apps.get_app_config("runs").path,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=int, default=300)
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    print(json.dumps(seed(results=args.results, runs=args.runs)))


if __name__ == "__main__":
    main()

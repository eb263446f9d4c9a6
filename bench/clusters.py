"""Server time of a run's failure clusters (endpoint and page) on big runs.

Builds two runs of N items each (default 100,000) whose results are stored by
the executor's own writer (so signatures are computed as in a real run): a
fifth of them errors of a handful of kinds whose messages carry varying
request ids, token counts, URLs and timestamps, and a quarter failing scores.
Then measures, with Django's in-process test client, best of 3 and with the
cache cleared before each request, ``GET /api/v1/runs/{id}/clusters`` and the
clusters page, alone and against the other run as baseline.

    .venv/bin/python bench/clusters.py [--items 100000]

SQLite in a temporary directory by default; with ``DATABASE_URL`` set, that
PostgreSQL database (migrated, then written to: use a scratch one).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BATCH = 2_000


def setup() -> None:
    sys.path.insert(0, str(ROOT))
    if not os.environ.get("DATABASE_URL"):
        os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="clusters-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def failure(rng: random.Random, n: int) -> dict[str, Any]:
    """One of a few failures, its details varying as real endpoints vary them."""
    rid = f"req_{rng.getrandbits(64):016x}"
    family = rng.choice(range(5))
    if family == 0:
        return {
            "error": (
                "permanent",
                "HTTP400",
                f"HTTP 400 Bad Request: maximum context length is 8192 tokens, "
                f"you requested {8192 + rng.randint(1, 9000)} tokens ({rid})",
            )
        }
    if family == 1:
        return {
            "error": (
                "transient",
                "HTTP429",
                f"HTTP 429 Too Many Requests: rate limited at "
                f"2026-11-22T16:{n % 60:02d}:{rng.randint(0, 59):02d}Z, "
                f"retry in {rng.random() * 9:.3f}s ({rid})",
            )
        }
    if family == 2:
        return {
            "error": ("timeout", "Timeout", f"attempt exceeded {rng.randint(5, 60)} s"),
            "status": "timed_out",
        }
    if family == 3:
        return {
            "error": (
                "transient",
                "ConnectError",
                f"cannot connect to https://h{rng.randint(1, 99)}.example.com/v1/x",
            )
        }
    return {
        "error": (
            "permanent",
            "MalformedResponse",
            f"malformed response chatcmpl-{rng.getrandbits(48):012x}: no choices",
        )
    }


def outcomes(count: int, *, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for n in range(count):
        draw = rng.random()
        if draw < 0.2:
            rows.append(failure(rng, n))
        elif draw < 0.45:
            reason = f"expected '{rng.randint(0, 200)}', got '{rng.randint(0, 200)}'"
            rows.append({"scores": [("exact_match", False, reason)]})
        else:
            rows.append({"scores": [("exact_match", True, "")]})
    return rows


def build(count: int) -> tuple[Any, Any, Any, float]:
    from django.contrib.auth.models import User

    from runs.datasets import importers
    from runs.projects.services import project_create
    from runs.results.services import run_create
    from tests.factories import store_outcomes

    user = User.objects.create_user(f"bench{time.time_ns()}", password="x")
    project = project_create(name=f"Clusters {time.time_ns()}", owner=user)
    items = [
        {"id": f"q{n}", "input": f"What is {n} + 1?", "expected": str(n + 1)}
        for n in range(count)
    ]
    dataset = importers.dataset_create_from_items(
        project=project, user=user, name="big", items=items
    )
    runs = []
    began = time.perf_counter()
    for seed in (1, 2):
        run = run_create(
            user=user,
            dataset=dataset,
            target_kind="python",
            target_config={"callable": "runs.targets.examples.echo"},
            scorers=["exact_match"],
            launch=False,
        )
        rows = outcomes(count, seed=seed)
        for start in range(0, count, BATCH):
            store_outcomes(run, rows[start : start + BATCH], offset=start)
        run.refresh_from_db()
        runs.append(run)
    return user, runs[0], runs[1], time.perf_counter() - began


def best_of(client: Any, url: str, times: int = 3) -> float:
    from django.core.cache import cache

    best = float("inf")
    for _ in range(times):
        cache.clear()
        began = time.perf_counter()
        response = client.get(url)
        elapsed = time.perf_counter() - began
        assert response.status_code == 200, (url, response.status_code)
        best = min(best, elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    setup()
    from django.db import connection
    from django.test import Client

    user, baseline, run, write_seconds = build(args.items)
    if connection.vendor == "postgresql":
        # As autovacuum would soon after such writes: plans follow the sizes.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    client = Client()
    client.force_login(user)
    print(f"{connection.vendor}, {args.items:,} items per run")
    print(
        f"  write 2 runs (executor writer, signatures included): {write_seconds:.1f} s"
    )
    for label, url in (
        ("endpoint", f"/api/v1/runs/{run.pk}/clusters"),
        (
            "endpoint vs baseline",
            f"/api/v1/runs/{run.pk}/clusters?baseline={baseline.pk}",
        ),
        ("page", f"/runs/{run.pk}/clusters/"),
        ("page vs baseline", f"/runs/{run.pk}/clusters/?baseline={baseline.pk}"),
    ):
        print(f"  {label:<22} {best_of(client, url) * 1000:8.1f} ms (best of 3)")


if __name__ == "__main__":
    main()

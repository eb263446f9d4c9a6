"""Server time of a run's summary on a large run: the analysis functions, the
summary endpoint and the run page, each the best of a few tries with the
cache emptied before each one.

    .venv/bin/python bench/summary.py [--items 100000] [--epochs 1]

SQLite in a temporary directory by default; with DATABASE_URL set, that
database (migrated, and a project named "Summary benchmark" added to it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BATCH = 5_000


def build(items: int, epochs: int, seed: int) -> tuple[Any, Any]:
    from runs.projects.services import project_create
    from runs.results.services import run_create

    """A finished run of ``items`` items x ``epochs`` with two scorers each."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from runs.models import Dataset, Item, Result, Run, RunStatus, Score

    rng = random.Random(seed)
    user = User.objects.create_user(f"bench-{seed}-{time.time_ns()}", "b@example.org")
    project = project_create(name=f"Summary benchmark {time.time_ns()}", owner=user)
    dataset = Dataset.objects.create(
        project=project,
        name="bench",
        content_hash="0" * 64,
        item_count=items,
        expected_count=items,
    )
    for start in range(0, items, BATCH):
        Item.objects.bulk_create(
            Item(dataset=dataset, index=i, external_id=f"q{i}", input="q", expected="a")
            for i in range(start, min(start + BATCH, items))
        )
    run = run_create(
        user=user,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match", "includes"],
        options={"epochs": epochs},
        launch=False,
    )
    began = timezone.now() - timedelta(hours=1)
    ids = list(Item.objects.filter(dataset=dataset).values_list("pk", flat=True))
    pairs = [(index, epoch) for index in range(items) for epoch in range(epochs)]
    counts = dict.fromkeys(Result.Status.values, 0)
    for start in range(0, len(pairs), BATCH):
        rows = []
        for index, epoch in pairs[start : start + BATCH]:
            ok = rng.random() < 0.9
            status = Result.Status.SUCCEEDED if ok else Result.Status.FAILED
            counts[status] += 1
            finished = began + timedelta(seconds=rng.uniform(0, 3000))
            tries = rng.choice([1, 1, 2])
            latency = rng.gammavariate(2, 50) if ok else None
            rows.append(
                Result(
                    run=run,
                    item_id=ids[index],
                    item_index=index,
                    epoch=epoch,
                    status=status,
                    output="out" if ok else None,
                    error_kind="" if ok else rng.choice(["transient", "permanent"]),
                    attempts=[{"number": n + 1} for n in range(tries)],
                    attempts_made=tries,  # as the rows' writer keeps it
                    latency_ms=latency,
                    # a failed attempt (a timeout) and its back-off before the last
                    time_to_result_ms=None
                    if latency is None
                    else latency + (tries - 1) * 60_000,
                    failed_attempts=tries - 1 + (not ok),
                    prompt_tokens=rng.randint(10, 100) if ok else None,
                    completion_tokens=rng.randint(1, 20) if ok else None,
                    started_at=finished - timedelta(seconds=1),
                    finished_at=finished,
                )
            )
        Result.objects.bulk_create(rows)
        Score.objects.bulk_create(
            Score(result=row, scorer=name, value=value, passed=value >= 0.5)
            for row in rows
            if row.status == Result.Status.SUCCEEDED
            for name, value in (
                ("exact_match", float(rng.random() < 0.6)),
                ("includes", rng.random()),
            )
        )
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED,
        started_at=began,
        finished_at=began + timedelta(seconds=3000),
        **counts,
    )
    run.refresh_from_db()
    if connection.vendor == "postgresql":
        # What autovacuum does soon after a run: plans from real row counts.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return user, run


def best_of(tries: int, work: Callable[[], Any]) -> dict[str, float]:
    """Wall and CPU seconds of this process (SQLite works in it), cold cache."""
    from django.core.cache import cache

    walls, cpus = [], []
    for _ in range(tries):
        cache.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"wall": round(min(walls), 3), "cpu": round(min(cpus), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--run", type=int, help="measure this stored run instead")
    parser.add_argument(
        "--data-dir", help="SQLite's directory, kept (default: a new temporary one)"
    )
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    if not os.environ.get("DATABASE_URL"):
        os.environ["EVALSITE_DATA_DIR"] = args.data_dir or tempfile.mkdtemp(
            prefix="evalsite-bench-"
        )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client

    from runs.analysis.charts import run_charts
    from runs.analysis.summary import run_summary

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    began = time.perf_counter()
    if args.run:
        from runs.models import Run

        run = Run.objects.select_related("created_by").get(pk=args.run)
        user = run.created_by
    else:
        user, run = build(args.items, args.epochs, seed=1)
    built = time.perf_counter() - began
    client = Client()
    client.force_login(user)

    def get(url: str) -> None:
        response = client.get(url)
        assert response.status_code == 200, response.status_code

    summary = run_summary(run=run)
    figures = {
        "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        "results": summary.counts["processed"],
        "epochs": args.epochs,
        "build_seconds": round(built, 1),
        "run_summary": best_of(args.tries, lambda: run_summary(run=run)),
        "run_charts": best_of(args.tries, lambda: run_charts(run=run, summary=summary)),
        "api_summary": best_of(
            args.tries, lambda: get(f"/api/v1/runs/{run.pk}/summary")
        ),
        "run_page": best_of(args.tries, lambda: get(f"/runs/{run.pk}/")),
    }
    # The same page again, its summary cached under the run's results_version.
    get(f"/runs/{run.pk}/")
    began = time.perf_counter()
    get(f"/runs/{run.pk}/")
    figures["run_page_cached"] = {"wall": round(time.perf_counter() - began, 3)}
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

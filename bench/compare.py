"""Server time of the comparison of two runs of 100,000 items each.

Seeds a fresh database (a temporary SQLite file, or the PostgreSQL database of
``DATABASE_URL``, whose evalsite tables are emptied first) with one dataset,
two finished runs and their results and scores, then times in-process (Django
test client, best of 3, cache cleared before each call):

- ``GET /api/v1/compare?baseline=A&candidates=B``
- ``GET /compare/?baseline=A&candidates=B`` (first page of the items)
- the same page filtered to regressions, and its last page

    .venv/bin/python bench/compare.py [--items 100000] [--scorers 2]
    DATABASE_URL=postgres://... .venv/bin/python bench/compare.py

Goal: under 1 s each.
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
sys.path.insert(0, str(ROOT))
GOAL_SECONDS = 1.0


def setup_django() -> None:
    if not os.environ.get("DATABASE_URL"):
        os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="evalsite-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def seed(items: int, scorers: int) -> tuple[int, int]:
    from django.contrib.auth.models import User
    from django.db import transaction
    from django.utils import timezone

    from runs.models import Dataset, Item, Membership, Project, Result, Run, Score

    Project.objects.filter(name="Compare bench").delete()
    User.objects.filter(username="bench").delete()
    user = User.objects.create_user("bench", password="bench-password-1")
    project = Project.objects.create(name="Compare bench")
    Membership.objects.create(project=project, user=user, role="admin")
    names = [f"scorer_{i}" for i in range(scorers)]
    rng = random.Random(1)
    now = timezone.now()
    with transaction.atomic():
        dataset = Dataset.objects.create(
            project=project, name="bench", content_hash="0" * 64, item_count=items
        )
        Item.objects.bulk_create(
            (
                Item(dataset=dataset, index=i, external_id=f"q{i}", input=f"q {i}")
                for i in range(items)
            ),
            batch_size=5000,
        )
        item_ids = list(
            Item.objects.filter(dataset=dataset)
            .order_by("index")
            .values_list("pk", flat=True)
        )
        runs = []
        for accuracy in (0.70, 0.72):
            run = Run.objects.create(
                project=project,
                dataset=dataset,
                dataset_hash=dataset.content_hash,
                target_kind="demo",
                scorers=[{"kind": "exact_match", "name": n} for n in names],
                total=items,
                succeeded=items,
                status="completed",
                started_at=now,
                finished_at=now,
            )
            Result.objects.bulk_create(
                (
                    Result(
                        run=run,
                        item_id=item_id,
                        item_index=index,
                        status="succeeded",
                        output=f"answer {rng.randrange(3)}",
                        started_at=now,
                        finished_at=now,
                    )
                    for index, item_id in enumerate(item_ids)
                ),
                batch_size=5000,
            )
            result_ids = Result.objects.filter(run=run).values_list("pk", flat=True)
            Score.objects.bulk_create(
                (
                    Score(result_id=result_id, scorer=name, value=v, passed=bool(v))
                    for result_id in result_ids.iterator(chunk_size=5000)
                    for name in names
                    for v in [float(rng.random() < accuracy)]
                ),
                batch_size=5000,
            )
            runs.append(run.pk)
    return runs[0], runs[1]


def best_of_3(client: Any, url: str) -> tuple[float, float]:
    """Best wall time and best CPU time of this process (with SQLite, the
    database's work too), over 3 calls on a cold cache."""
    from django.core.cache import cache

    wall, cpu = [], []
    for _ in range(3):
        cache.clear()
        start, start_cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        assert response.status_code == 200, (url, response.status_code)
    return min(wall), min(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--scorers", type=int, default=2)
    args = parser.parse_args()
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    start = time.perf_counter()
    baseline, candidate = seed(args.items, args.scorers)
    print(f"seeded {args.items} items x 2 runs in {time.perf_counter() - start:.1f} s")
    if connection.vendor == "postgresql":
        # What autovacuum would have done by then: the planner's statistics.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    client = Client()
    client.force_login(User.objects.get(username="bench"))
    query = f"baseline={baseline}&candidates={candidate}"
    pages = {
        "api /api/v1/compare": f"/api/v1/compare?{query}",
        "page /compare/": f"/compare/?{query}",
        "page, regressions": f"/compare/?{query}&change=regressions",
        "page, last page": f"/compare/?{query}&page=1000000",
    }
    print(f"database: {connection.vendor}, goal < {GOAL_SECONDS} s")
    print(f"{'':24} {'wall':>8} {'cpu':>8}")
    for name, url in pages.items():
        wall, cpu = best_of_3(client, url)
        print(f"{name:24} {wall:6.3f} s {cpu:6.3f} s")


if __name__ == "__main__":
    main()

"""Server time of a run's filtered results and of a retry's plan, 100,000 items.

    EVALSITE_DATA_DIR=/tmp/somewhere .venv/bin/python bench/retry_filters.py
    DATABASE_URL=postgres://... .venv/bin/python bench/retry_filters.py

Migrates the database, builds one run of N items (results written straight
into the tables: 60 % succeeded, 30 % failed in two clusters, 5 % timed out,
5 % without a result, each succeeded one scored), and measures with Django's
in-process test client, best of 3: the run page and the API filtered to
pending, failed, a scorer's failed verdict and a cluster; and the retry's dry
run (the confirmation page). The run is left "running" so pending is live.
The template cache is cleared before each request. A second call measures the
run the first one built.

Figures (2 shared cores, best of 3, ms): SQLite: page pending 530, failed 275,
verdict 434, cluster 290; API pending 289, failed 46, verdict 163, external id
20; retry confirmation 490. PostgreSQL: page 238 / 177 / 224 / 165; API 89 /
33 / 73 / 42; retry confirmation 174.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build(items: int) -> tuple[object, int]:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from runs.models import Item, Result, Run, RunStatus, Score
    from runs.projects.services import project_create
    from runs.results.services import run_create
    from tests.factories import arithmetic_items, make_dataset

    user = User.objects.create_user("bench-retry", password="bench-password")
    project = project_create(name="Bench retry", owner=user)
    dataset = make_dataset(project, arithmetic_items(items))
    run = run_create(
        user=user,
        dataset=dataset,
        target_kind="demo",
        target_config={},
        scorers=["exact_match"],
        launch=False,
    )
    now = timezone.now()
    rows = []
    for pk, index in Item.objects.filter(dataset=dataset).values_list("pk", "index"):
        slot = index % 20
        if slot == 19:
            continue  # no result yet
        status = "succeeded" if slot < 12 else "failed" if slot < 18 else "timed_out"
        failed = status != "succeeded"
        rows.append(
            Result(
                run=run,
                item_id=pk,
                item_index=index,
                status=status,
                output=None if failed else "42",
                error_kind="transient" if failed else "",
                error_signature=f"sig-{slot % 2}" if failed else "",
                attempts=[{"number": 1}],
                started_at=now,
                finished_at=now,
            )
        )
    Result.objects.bulk_create(rows, batch_size=5000)
    scored = Result.objects.filter(run=run, status="succeeded").values_list(
        "pk", "item_index"
    )
    Score.objects.bulk_create(
        (
            Score(result_id=pk, scorer="exact_match", value=v, passed=bool(v))
            for pk, index in scored
            for v in [float(index % 3 != 0)]
        ),
        batch_size=5000,
    )
    from runs.executor.store import run_recount

    run = Run.objects.get(pk=run.pk)
    run_recount(run)
    run.status = RunStatus.RUNNING
    run.heartbeat_at = timezone.now()
    run.save()
    return user, run.pk


def best_of_3(client: object, url: str) -> float:
    from django.core.cache import cache

    times = []
    for _ in range(3):
        cache.clear()  # the run page caches its results table: measure the work
        began = time.perf_counter()
        response = client.get(url)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - began)
        assert response.status_code == 200, (url, response.status_code)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    call_command("migrate", verbosity=0)
    from runs.models import Run

    began = time.perf_counter()
    existing = Run.objects.filter(project__name="Bench retry").first()
    if existing is not None:  # built by an earlier call: measure it again
        user, run_id = existing.created_by, existing.pk
        Run.objects.filter(pk=run_id).update(status="running")
    else:
        user, run_id = build(args.items)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # as autovacuum would, before measuring
    print(
        f"{connection.vendor}: {args.items} items ready in "
        f"{time.perf_counter() - began:.1f} s",
        flush=True,
    )
    client = Client()
    client.force_login(user)
    page = f"/runs/{run_id}/"
    api = f"/api/v1/runs/{run_id}/results"
    for name, url in [
        ("page ?status=pending", f"{page}?status=pending"),
        ("page ?status=failed", f"{page}?status=failed"),
        ("page ?scorer&verdict=failed", f"{page}?scorer=exact_match&verdict=failed"),
        ("page ?cluster", f"{page}?cluster=sig-1&status=failed"),
        ("api ?status=pending", f"{api}?status=pending"),
        ("api ?status=failed", f"{api}?status=failed"),
        ("api ?scorer&verdict=failed", f"{api}?scorer=exact_match&verdict=failed"),
        ("api ?external_id", f"{api}?external_id=q99998"),
    ]:
        print(f"{name:32} {best_of_3(client, url) * 1000:8.1f} ms", flush=True)

    Run.objects.filter(pk=run_id).update(status="completed_with_errors")
    retry = f"/runs/{run_id}/retry/?status=failed&status=timed_out"
    print(
        f"{'retry confirmation (dry run)':32} {best_of_3(client, retry) * 1000:8.1f} ms"
    )


if __name__ == "__main__":
    main()

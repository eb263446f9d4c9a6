"""Server time of failure clusters by content on a run of 20,000 failing items.

Seeds a scratch database as ``analysis_bench.py`` does (a temporary SQLite
file, or with ``DATABASE_URL`` a scratch PostgreSQL database, dropped at the
end) with a dataset of word problems of a dozen topics, their wording varied,
and a finished run whose every result fails (a wrong answer scored by exact
match, a tenth of them errors), written by the executor's own writer. Then,
in-process:

- the first ``GET /api/v1/runs/{id}/clusters?by=content``: computes and
  stores the clusters (this process has not imported scikit-learn yet; that
  import is timed apart);
- the same again with the cache cleared (read back, stored per run version);
- the stages of one computation: reading the failing items, TF-IDF, the SVD,
  HDBSCAN and the assignment of the rest, and the names.

    .venv/bin/python bench/content_clusters.py [--items 20000]
    DATABASE_URL=postgres://... .venv/bin/python bench/content_clusters.py

Goal: the first request under 10 s; the load of the machine (``uptime``) is
printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from analysis_bench import run_in_scratch

ROOT = Path(__file__).resolve().parent.parent
GOAL_SECONDS = 10.0
BATCH = 2_000
TOPICS = {
    "trains": "train station leaves arrives speed miles hour distance travel",
    "baking": "baker flour sugar eggs oven cake cookies batch recipe cups",
    "money": "dollars cents saves spends wallet allowance price store buys",
    "garden": "garden plants seeds rows tomatoes flowers water soil grows",
    "school": "students class teacher pencils books desks grade lesson",
    "sports": "team players points game season goals score match wins",
    "animals": "farm cows chickens legs horses sheep barn feed pigs",
    "time": "minutes hours clock weeks days calendar schedule late early",
    "geometry": "rectangle area perimeter length width square triangle side",
    "fractions": "fraction half third quarter pizza slices share equal",
    "fuel": "car gallons gas tank fuel road trip refuel pump",
    "reading": "pages book chapters reads novel library shelf magazine",
}
FILLER = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "is",
    "in",
    "how",
    "many",
    "much",
    "if",
    "then",
    "each",
    "every",
    "total",
]


def question(rng: random.Random, topic: str) -> str:
    words = TOPICS[topic].split()
    body = rng.choices(words, k=9) + rng.choices(FILLER, k=8)
    body += [str(rng.randint(1, 500)) for _ in range(3)]
    rng.shuffle(body)
    return " ".join(body).capitalize() + "?"


def build(count: int) -> tuple[Any, Any, float]:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from runs.datasets import importers
    from runs.models import Run, RunStatus
    from runs.projects.services import project_create
    from runs.results.services import run_create
    from tests.factories import store_outcomes

    rng = random.Random(0)
    user = User.objects.create_user(f"bench{time.time_ns()}", password="x")
    project = project_create(name=f"Content {time.time_ns()}", owner=user)
    topics = list(TOPICS)
    items = [
        {
            "id": f"q{n}",
            "input": question(rng, topics[n % len(topics)]),
            "expected": str(rng.randint(1, 999)),
        }
        for n in range(count)
    ]
    dataset = importers.dataset_create_from_items(
        project=project, user=user, name="word problems", items=items
    )
    run = run_create(
        user=user,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        launch=False,
    )
    began = time.perf_counter()
    rows = [
        {"error": ("permanent", "HTTP400", "HTTP 400 Bad Request: context too long")}
        if rng.random() < 0.1
        else {"scores": [("exact_match", False, "answer does not equal expected")]}
        for _ in range(count)
    ]
    for start in range(0, count, BATCH):
        store_outcomes(run, rows[start : start + BATCH], offset=start)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return user, run, time.perf_counter() - began


def stages(run: Any) -> list[tuple[str, float]]:
    """The time of each stage of one computation of the run's clusters (on
    one BLAS thread, as ``group_texts`` computes them)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _stages(run)


def _stages(run: Any) -> list[tuple[str, float]]:
    import numpy as np

    from runs.analysis import content_vectors as cv
    from runs.analysis.content_clusters import failing_rows

    spent = []
    began = time.process_time()
    texts = [cv.item_text(*row[5:]) for row in failing_rows(run)]
    spent.append(("read the failing items", time.process_time() - began))
    began = time.process_time()
    matrix, terms = cv.tfidf(texts)
    spent.append(("TF-IDF", time.process_time() - began))
    began = time.process_time()
    points = cv.reduced(matrix)
    spent.append(("truncated SVD", time.process_time() - began))
    began = time.process_time()
    labels = cv.labels_of(points)
    spent.append(("HDBSCAN and assignment", time.process_time() - began))
    began = time.process_time()
    clusters = int(labels.max()) + 1
    cv.distinctive_terms(matrix, terms, labels, clusters)
    spent.append(("names", time.process_time() - began))
    noise = int(np.count_nonzero(labels == cv.NOISE))
    spent.append((f"({clusters} clusters, {noise} unclustered)", 0.0))
    return spent


def timed_get(client: Any, url: str) -> tuple[float, float, dict[str, Any]]:
    """Wall and CPU seconds of a request (CPU: this process's, all threads;
    what the wall time would be on an idle machine, the work being on one
    thread), and its answer."""
    from django.core.cache import cache

    cache.clear()
    began, cpu = time.perf_counter(), time.process_time()
    response = client.get(url)
    elapsed = time.perf_counter() - began
    cpu = time.process_time() - cpu
    assert response.status_code == 200, (url, response.status_code)
    return elapsed, cpu, response.json()


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    django.setup()
    call_command("migrate", verbosity=0)
    user, failing_run, seconds = build(args.items)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(f"{args.label}: {args.items:,} failing items written in {seconds:.0f} s")
    client = Client()
    client.force_login(user)
    url = f"/api/v1/runs/{failing_run.pk}/clusters?by=content"
    imported = "sklearn" in sys.modules
    first, cpu, body = timed_get(client, url)
    verdict = "ok" if first < GOAL_SECONDS else "OVER GOAL"
    print(
        f"first request (computes and stores): {first:6.2f} s wall, {cpu:6.2f} s "
        f"CPU; goal {GOAL_SECONDS:.0f} s: {verdict}"
        f"{'' if not imported else ' (scikit-learn was already imported)'}"
    )
    again, cpu, _ = timed_get(client, url)
    print(
        f"second request (stored, cache cleared): {again:6.3f} s wall, {cpu:.3f} s CPU"
    )
    sizes = [c["count"] for c in body["clusters"]]
    print(
        f"{len(sizes)} clusters, sizes {sizes[:12]}{' ...' if len(sizes) > 12 else ''}"
        f"; unclustered {body['unclustered']['count']}"
    )
    for cluster in body["clusters"][:12]:
        print(f"  {cluster['count']:6d}  {cluster['name']}")
    print(
        "\none computation, CPU seconds by stage (importing scikit-learn, part "
        f"of the first request: {import_seconds():.2f} s CPU in a fresh process)"
    )
    for label, spent in stages(failing_run):
        print(f"  {label:28} {spent:6.2f} s" if spent else f"  {label}")
    one, five, fifteen = os.getloadavg()
    print(f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs")


def import_seconds() -> float:
    """CPU time of the import of the clustering module (scikit-learn) in a
    new process."""
    code = (
        "import time; t = time.process_time(); "
        "import runs.analysis.content_vectors; print(time.process_time() - t)"
    )
    answer = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return float(answer.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()

"""What a first view of a finished run's page and summary costs, in detail.

Seeds the analysis benchmark's two runs (``analysis_bench.seed_analysis``)
in a scratch database, then for each URL: the CPU seconds of ``--repeat``
first views (every cache cleared before each; median and minimum), the SQL
statements one view runs, and the Python function calls it makes (cProfile,
which no other load on the machine moves).

    .venv/bin/python bench/page_cost.py                       # 100,000 items
    .venv/bin/python bench/page_cost.py --source /tmp/before  # older code
    .venv/bin/python bench/page_cost.py --profile 25          # top functions

``--source`` measures another checkout's code with this script, as
``analysis_bench.py`` does; alternate sources to compare them. Environment:
``SORT`` orders ``--profile``'s functions (``tottime``; default cumulative),
``PSTATS_DIR`` keeps each URL's profile there (to compare two checkouts
function by function), ``SHOW_SQL=1`` prints each statement.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from typing import Any

from analysis_bench import FIGURES_SECONDS, run_in_scratch, seed_analysis

URLS = [
    ("run page", "/runs/{a}/"),
    ("run page, status=failed", "/runs/{a}/?status=failed"),
    ("summary API", "/api/v1/runs/{a}/summary"),
]


def clear_caches() -> None:
    from django.core.cache import caches

    for cache in caches.all():
        cache.clear()


def first_view(client: Any, url: str) -> tuple[float, int]:
    clear_caches()
    began = time.process_time()
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return time.process_time() - began, len(response.content)


def calls_and_queries(client: Any, url: str, top: int) -> tuple[int, int, str]:
    from django.db import connection

    # Counted by a wrapper: the request's start empties connection.queries.
    queries: list[str] = []

    def count(execute: Any, sql: str, *args: Any) -> Any:
        queries.append(sql)
        return execute(sql, *args)

    clear_caches()
    with connection.execute_wrapper(count):
        client.get(url)
    if os.environ.get("SHOW_SQL"):
        print("\n".join(f"  {sql[:300]}" for sql in queries))
    clear_caches()
    profile = cProfile.Profile()
    profile.enable()
    client.get(url)
    profile.disable()
    stats = pstats.Stats(profile)
    if os.environ.get("PSTATS_DIR"):
        name = url.strip("/").replace("/", "_").replace("?", "_")
        stats.dump_stats(os.path.join(os.environ["PSTATS_DIR"], name + ".pstats"))
    text = ""
    if top:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(
            os.environ.get("SORT", "cumulative")
        ).print_stats(top)
        text = out.getvalue()
    return stats.total_calls, len(queries), text  # type: ignore[attr-defined]


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command
    from django.test import Client

    django.setup()
    call_command("migrate", verbosity=0)
    seeded = seed_analysis(items=args.items)
    print(
        f"load {os.getloadavg()[0]:.1f}; figures stored when each run ended: "
        + ", ".join(f"{s:.3f} s" for s in FIGURES_SECONDS)
    )
    client = Client()
    client.force_login(seeded.user)
    ids = {"a": seeded.baseline.pk, "b": seeded.candidate.pk}
    for label, template in URLS:
        url = template.format(**ids)
        first_view(client, url)  # warm-up: imports, compiled templates
        cpu, size = zip(
            *(first_view(client, url) for _ in range(args.repeat)), strict=True
        )
        calls, queries, text = calls_and_queries(client, url, args.profile)
        print(
            f"{label:26} cpu ms median {1000 * statistics.median(cpu):7.2f} "
            f"min {1000 * min(cpu):7.2f}  queries {queries:3}  "
            f"calls {calls:8,}  bytes {size[0]:,}"
        )
        if text:
            print(text)
    print(f"load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--profile", type=int, default=0, help="top N functions")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--source", help="measure another checkout's code")
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()

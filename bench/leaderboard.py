"""Server time of a leaderboard of five runs of 100,000 items each.

Seeds a scratch database as ``analysis_bench.py`` does (a temporary SQLite
file, or with ``DATABASE_URL`` a scratch PostgreSQL database, dropped at the
end) with one dataset and five finished runs of it (an exact-match scorer and
a numeric judge), then times in-process, best of ``--repeat`` (wall, and the
CPU time of this process: all its threads, and SQLite's work), caches cleared
before each call:

- ``GET /api/v1/leaderboard?runs=A,B,C,D,E``
- ``GET /leaderboard/?runs=A,B,C,D,E``
- the API for each scorer alone (``&scorer=exact_match``, ``&scorer=judge``)

    .venv/bin/python bench/leaderboard.py [--items 100000] [--runs 5]
    DATABASE_URL=postgres://... .venv/bin/python bench/leaderboard.py

Goal: under 2 s each. Each run's verdicts are stored when it ends, as the
executor does; that time is printed apart.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import analysis_bench
from analysis_bench import Profile, run_in_scratch, seed_analysis, seed_run

GOAL_SECONDS = 2.0
# Runs beyond the analysis benchmark's two: other pass and error shares.
MORE = [
    Profile(pass_share=0.70, error_share=0.06, new_error_kind=False, seed=3),
    Profile(pass_share=0.78, error_share=0.03, new_error_kind=True, seed=4),
    Profile(pass_share=0.80, error_share=0.04, new_error_kind=False, seed=5),
]


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    django.setup()
    call_command("migrate", verbosity=0)
    begin = time.perf_counter()
    seeded = seed_analysis(items=args.items)
    runs = [seeded.baseline, seeded.candidate]
    for number, profile in enumerate(MORE[: args.runs - 2]):
        runs.append(
            seed_run(
                user=seeded.user,
                dataset=seeded.dataset,
                profile=profile,
                name=f"run {number + 3}",
            )
        )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(
        f"seeded {len(runs)} runs of {args.items:,} items in "
        f"{time.perf_counter() - begin:.0f} s; figures and verdicts stored when "
        "each ended: " + ", ".join(f"{s:.3f} s" for s in analysis_bench.FIGURES_SECONDS)
    )
    client = Client()
    client.force_login(seeded.user)
    ids = ",".join(str(run.pk) for run in runs)
    print(f"\n{args.label}")
    print(f"{'what':24} {'wall s':>8} {'cpu s':>8} {'goal s':>7}  result")
    for label, url in (
        ("leaderboard API", f"/api/v1/leaderboard?runs={ids}"),
        ("leaderboard page", f"/leaderboard/?runs={ids}"),
        ("API, pass/fail scorer", f"/api/v1/leaderboard?runs={ids}&scorer=exact_match"),
        ("API, numeric scorer", f"/api/v1/leaderboard?runs={ids}&scorer=judge"),
    ):
        wall, cpu = best_of(client, url, args.repeat)
        verdict = "ok" if wall <= GOAL_SECONDS else "over goal"
        print(f"{label:24} {wall:8.3f} {cpu:8.3f} {GOAL_SECONDS:7.1f}  {verdict}")
    print(breakdown(runs))


def best_of(client: Any, url: str, repeat: int) -> tuple[float, float]:
    """Best wall and best CPU time of ``repeat`` GETs, caches cleared before each."""
    from django.core.cache import caches

    walls, cpus = [], []
    for _ in range(repeat):
        for cache in caches.all():
            cache.clear()
        began, began_cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        if response.streaming:
            b"".join(response.streaming_content)
        else:
            _ = response.content
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - began_cpu)
    return min(walls), min(cpus)


def breakdown(runs: list[Any]) -> str:
    """Where one computation's time goes: the numeric pairwise tests (the
    comparison's sign-flip test, once per pair of runs) and the rest."""
    from runs.analysis import compare
    from runs.leaderboard.selectors import leaderboard_compute

    test = compare.sign_flip_test
    spent = [0.0, 0.0]
    methods: set[str] = set()

    def timed(*args: Any, **kwargs: Any) -> Any:
        began, began_cpu = time.perf_counter(), time.process_time()
        try:
            flip = test(*args, **kwargs)
            methods.add(flip.method)
            return flip
        finally:
            spent[0] += time.perf_counter() - began
            spent[1] += time.process_time() - began_cpu

    compare.sign_flip_test = timed  # measured here only
    try:
        began, began_cpu = time.perf_counter(), time.process_time()
        leaderboard_compute(runs)
        total = time.perf_counter() - began
        total_cpu = time.process_time() - began_cpu
    finally:
        compare.sign_flip_test = test
    return (
        f"one computation: {total:.3f} s ({total_cpu:.3f} s CPU), of which the "
        f"numeric scorer's pairwise sign-flip tests ({', '.join(sorted(methods))}) "
        f"{spent[0]:.3f} s ({spent[1]:.3f} s CPU) and the rest "
        f"{total - spent[0]:.3f} s ({total_cpu - spent[1]:.3f} s CPU)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5, choices=range(2, 6))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()

"""What storing a run's figures costs when it ends, part by part.

Seeds the analysis benchmark's two runs (``analysis_bench.seed_analysis``)
in a scratch database, then computes and stores the baseline run's figures
``--repeat`` times as the executor does when a run ends
(``figures.run_figures_store``), every stored figure and cache removed
before each: the CPU seconds of the whole and of each part it calls
(median and minimum), and the statements that read the results table.

    .venv/bin/python bench/run_end.py                       # 100,000 items
    .venv/bin/python bench/run_end.py --source /tmp/before  # older code

``--source`` measures another checkout's code with this script, as
``analysis_bench.py`` does; alternate sources to compare them.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from analysis_bench import run_in_scratch, seed_analysis

# The parts of ``run_figures_store``, by the name the figures module calls
# them, whichever of them the measured code has.
PARTS = {
    "run_end_scan": "one read of results, scores",
    "run_figures": "summary and charts",
    "run_verdicts": "verdicts",
    "run_result_table": "result table",
    "run_tables_store": "verdicts and result table",
}
# What a run stores when it ends, whichever of them the measured code has.
STORED = ("RunFigures", "RunVerdicts", "RunResultTable")


def timed(function: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent.append(time.process_time() - began)

    return wrapper


def forget(run: Any) -> None:
    """Every figure stored or cached of ``run``: the next store computes them."""
    from django.core.cache import caches

    from runs import models

    for name in STORED:
        model = getattr(models, name, None)
        if model is not None:
            model.objects.filter(run=run).delete()
    for cache in caches.all():
        cache.clear()
    # A table read is kept with its run instance while it lives (equal
    # instances alike): gone once the instances of earlier stores are.
    gc.collect()


def result_reads(run_id: int) -> int:
    """Statements of one store that read the results table."""
    from django.db import connection

    from runs.analysis import figures
    from runs.models import Result

    table = Result._meta.db_table
    found: list[str] = []

    def count(execute: Any, sql: str, *args: Any) -> Any:
        if table in sql and sql.lstrip().upper().startswith("SELECT"):
            found.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(count):
        figures.run_figures_store(run_id)
    return len(found)


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    seeding: list[float] = []
    seeded = seed_analysis(items=args.items, figures_cpu=seeding)
    print(
        f"load {os.getloadavg()[0]:.1f}; CPU of the figures stored when each "
        "run ended: " + ", ".join(f"{s:.3f} s" for s in seeding)
    )

    from runs.analysis import figures

    spent: dict[str, list[float]] = defaultdict(list)
    for name in PARTS:
        if hasattr(figures, name):
            setattr(figures, name, timed(getattr(figures, name), spent[name]))
    totals = []
    for _ in range(args.repeat):
        forget(seeded.baseline)
        began = time.process_time()
        figures.run_figures_store(seeded.baseline.pk)
        totals.append(time.process_time() - began)
    forget(seeded.baseline)
    reads = result_reads(seeded.baseline.pk)

    def line(label: str, values: list[float]) -> str:
        return (
            f"{label:28} cpu s median {statistics.median(values):6.3f} "
            f"min {min(values):6.3f}"
        )

    print(line("figures stored at run end", totals))
    for name, label in PARTS.items():
        if spent[name]:
            print(line(f"  {label}", spent[name]))
    print(f"statements reading the results: {reads}")
    print(f"load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--source", help="measure another checkout's code")
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()

"""Storage: bytes per item, result and score, and the database's size.

``storage_figures()`` measures the database Django is connected to: on
SQLite the pages of each table and index (the ``dbstat`` table) and the
file's size; on PostgreSQL ``pg_table_size`` (heap and TOAST),
``pg_indexes_size`` and ``pg_database_size``. ``bench/million.py`` reports
them after a million-item run; run alone, this script seeds two finished runs
of ``--items`` items with two scores each (``analysis_bench``: outputs,
failure reasons, error messages as real endpoints send them) on a scratch
database and reports them.

    .venv/bin/python bench/storage.py                      # SQLite, 100,000 items
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/storage.py                  # PostgreSQL
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_bench import run_in_scratch

TABLES = ("runs_item", "runs_result", "runs_score", "runs_step")
MIB = 2**20


def _sizes() -> tuple[dict[str, tuple[int, int]], int]:
    """Per table: (bytes of its rows, bytes of its indexes); the database's size."""
    from django.db import connection

    sizes: dict[str, tuple[int, int]] = {}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for table in TABLES:
                cursor.execute("SELECT to_regclass(%s)", [table])
                if cursor.fetchone()[0] is None:
                    continue
                cursor.execute(
                    "SELECT pg_table_size(%s), pg_indexes_size(%s)", [table, table]
                )
                rows, indexes = cursor.fetchone()
                sizes[table] = (rows, indexes)
            cursor.execute("SELECT pg_database_size(current_database())")
            return sizes, cursor.fetchone()[0]
        cursor.execute(
            "SELECT m.tbl_name, m.type, SUM(d.pgsize) FROM dbstat d "
            "JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name, m.type"
        )
        for table, kind, size in cursor.fetchall():
            if table in TABLES:
                rows, indexes = sizes.get(table, (0, 0))
                if kind == "table":
                    rows += size
                else:
                    indexes += size
                sizes[table] = (rows, indexes)
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return sizes, pages * cursor.fetchone()[0]


def index_sizes() -> list[tuple[str, str, int]]:
    """(table, index, bytes) for each index of the tables measured."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tablename, indexname, pg_relation_size(indexname::regclass) "
                "FROM pg_indexes WHERE tablename = ANY(%s) ORDER BY 1, 2",
                [list(TABLES)],
            )
        else:
            cursor.execute(
                "SELECT m.tbl_name, m.name, SUM(d.pgsize) FROM dbstat d "
                "JOIN sqlite_master m ON m.name = d.name WHERE m.type = 'index' "
                "GROUP BY m.name ORDER BY 1, 2"
            )
        return [row for row in cursor.fetchall() if row[0] in TABLES]


def storage_figures(run_id: int | None = None) -> list[tuple[str, float, str]]:
    """(what, value, unit) for the database, each table, and one run."""
    from django.db import connection

    from runs.models import Item, Result, Run, Score

    sizes, database = _sizes()
    counts = {
        "runs_item": Item.objects.count(),
        "runs_result": Result.objects.count(),
        "runs_score": Score.objects.count(),
    }
    figures: list[tuple[str, float, str]] = [
        (f"{connection.vendor}: database size", database / MIB, "MiB")
    ]
    per_row: dict[str, float] = {}
    for table, count in counts.items():
        if table not in sizes or not count:
            continue
        rows, indexes = sizes[table]
        per_row[table] = (rows + indexes) / count
        figures += [
            (f"{table}: {count:,} rows, table", rows / MIB, "MiB"),
            (f"{table}: indexes", indexes / MIB, "MiB"),
            (f"{table}: bytes per row (indexes in)", per_row[table], "B"),
        ]
    for table, index, size in index_sizes():
        if counts.get(table):
            figures.append(
                (f"{table}: index {index}, bytes per row", size / counts[table], "B")
            )
    if run_id is not None and "runs_result" in per_row:
        run = Run.objects.get(pk=run_id)
        results = Result.objects.filter(run_id=run_id).count()
        scores = Score.objects.filter(result__run_id=run_id).count()
        estimate = results * per_row["runs_result"] + scores * per_row.get(
            "runs_score", 0
        )
        figures.append(
            (
                f"run {run.pk}: {results:,} results and {scores:,} scores, "
                "estimated at the tables' bytes per row",
                estimate / MIB,
                "MiB",
            )
        )
        figures += stored_with_run(run_id, results)
    return figures


def stored_with_run(run_id: int, results: int) -> list[tuple[str, float, str]]:
    """What a finished run stores beside its rows (its verdicts for
    comparisons, its result table for filters and clusters): bytes, and
    bytes per result."""
    from django.db.models.functions import Length

    from runs.models import RunResultTable, RunVerdicts

    figures = []
    for model in (RunVerdicts, RunResultTable):
        size = (
            model.objects.filter(run_id=run_id)
            .values_list(Length("data"), flat=True)
            .first()
        )
        if size is None:
            continue
        name = model._meta.verbose_name
        figures.append((f"run {run_id}: {name}, stored", size / MIB, "MiB"))
        if results:
            figures.append(
                (f"run {run_id}: {name}, bytes per result", size / results, "B")
            )
    return figures


def bench(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from analysis_bench import seed_analysis

    seeded = seed_analysis(items=args.items)
    if args.vacuum:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("VACUUM" if connection.vendor == "sqlite" else "ANALYZE")
    print(f"{args.label}: two runs of {args.items:,} items, two scores a result")
    for what, value, unit in storage_figures(seeded.baseline.pk):
        print(f"{what:72} {value:12,.1f} {unit}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--vacuum", action="store_true", help="VACUUM (SQLite) before measuring"
    )
    args = parser.parse_args()
    os.chdir(Path(__file__).resolve().parent.parent)
    run_in_scratch(bench, args)


if __name__ == "__main__":
    main()

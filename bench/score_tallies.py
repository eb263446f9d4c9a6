"""A going run's scorers' table from its tallies, against from its score rows.

In a scratch database (``analysis_bench.run_in_scratch``) it makes a going
run of ``--items`` items and stores their results through the executor's
writer (``store.results_write``), ``--batch`` a batch, as an executor does:
two scorers, values between 0 and 1, 1% failed calls, scorer errors and
skips. The writer keeps the run's tallies with each batch (and folds them
every ``tallies.FOLD_EVERY`` batches). Then it times the live block's
scorers' table (``summary.run_scorer_summaries``), each read ``--reads``
times:

- from the tallies (what a going run reads now);
- from the score rows (what it read before, and still reads once a rewrite
  has moved the run's revision);

checks that both give the same figures, and prints the CPU of the writer's
tallies per stored result (``tallies.tally_rows``, timed apart).

    .venv/bin/python bench/score_tallies.py                     # 1,000,000 items
    .venv/bin/python bench/score_tallies.py --items 100000
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/score_tallies.py                 # PostgreSQL
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from typing import Any

from analysis_bench import run_in_scratch


def records_of(items: list[Any], now: Any) -> list[Any]:
    from runs.executor.store import ResultRecord, ScoreRecord

    records = []
    for item in items:
        index = item.index
        record = ResultRecord(
            item_id=item.pk,
            item_index=index,
            epoch=0,
            status="succeeded",
            output=f"answer {index}",
            attempts=[{"number": 1, "outcome": "ok"}],
            started_at=now,
            finished_at=now,
        )
        if index % 100 == 7:
            record.status, record.output = "failed", None
            record.error_kind, record.error_type = "server", "HTTPError"
        else:
            value = (index % 11) / 10
            record.scores = [
                ScoreRecord("exact_match", value, value >= 0.5),
                ScoreRecord("includes", None, None, error="ValueError")
                if index % 50 == 3
                else ScoreRecord("includes", None, None, skipped=True)
                if index % 9 == 4
                else ScoreRecord("includes", 1 - value, value < 0.5),
            ]
        records.append(record)
    return records


def timed(read: Any, reads: int) -> tuple[float, float, Any]:
    """(median wall, median CPU) seconds of ``reads`` calls, and the last answer."""
    walls, cpus = [], []
    for _ in range(reads):
        wall, cpu = time.perf_counter(), time.process_time()
        found = read()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), found


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)

    from django.utils import timezone

    from runs.analysis.summary import run_scorer_summaries
    from runs.executor.store import results_write
    from runs.models import Dataset, Item, Project, Run, RunStatus, ScoreTally
    from runs.records import tallies

    project = Project.objects.create(name="tallies")
    dataset = Dataset.objects.create(
        project=project, name="tallies", item_count=args.items
    )
    Item.objects.bulk_create(
        (
            Item(
                dataset=dataset,
                index=i,
                external_id=f"q{i}",
                input=f"{i} + 1",
                expected=str(i + 1),
            )
            for i in range(args.items)
        ),
        batch_size=10_000,
    )
    run = Run.objects.create(
        project=project,
        dataset=dataset,
        target_kind="demo",
        scorers=[{"name": "exact_match"}, {"name": "includes"}],
        status=RunStatus.RUNNING,
        total=args.items,
        started_at=timezone.now(),
    )

    now = timezone.now()
    stored_cpu = tally_cpu = 0.0
    for start in range(0, args.items, args.batch):
        items = list(
            Item.objects.filter(
                dataset=dataset, index__gte=start, index__lt=start + args.batch
            )
        )
        records = records_of(items, now)
        began = time.process_time()
        tallies.tally_rows(run.pk, records)
        tally_cpu += time.process_time() - began
        began = time.process_time()
        results_write(run.pk, records)
        stored_cpu += time.process_time() - began
    run.refresh_from_db()
    assert run.tallied and run.processed == args.items, "the run's tallies began"
    tally_rows = ScoreTally.objects.filter(run=run).count()

    tallied = timed(lambda: run_scorer_summaries(run=run), args.reads)
    untallied = Run.objects.get(pk=run.pk)
    untallied.tally_revision = None
    from_rows = timed(lambda: run_scorer_summaries(run=untallied), args.reads)

    for got, want in zip(tallied[2], from_rows[2], strict=True):
        assert math.isclose(got.mean, want.mean, rel_tol=1e-9), (got, want)
        assert (got.passed, got.judged, got.scored, got.errored, got.skipped) == (
            want.passed,
            want.judged,
            want.scored,
            want.errored,
            want.skipped,
        ), (got, want)

    print(
        f"{args.label}; load {os.getloadavg()[0]:.1f}; {args.items:,} results "
        f"stored in batches of {args.batch:,}: {stored_cpu:.1f} s of CPU, of "
        f"which the tallies' rows {tally_cpu:.2f} s "
        f"({tally_cpu / args.items * 1e6:.2f} µs a result); "
        f"{tally_rows} tally rows kept"
    )
    for name, (wall, cpu, _) in (("tallies", tallied), ("score rows", from_rows)):
        print(
            f"scorers' table from its {name}: {wall * 1000:.1f} ms "
            f"({cpu * 1000:.1f} ms CPU), median of {args.reads}"
        )
    print("the same figures from both")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()

"""What one viewer of a large going run costs the server, second by second.

Seeds the analysis benchmark's two runs (``analysis_bench.seed_analysis``,
``--items`` results each) in a scratch database and sets the baseline run
back to running. Then it plays ``--seconds`` seconds of one viewer of its
page. Each second:

- a batch of ``--batch`` results is counted on the run's row, as a writer's
  batch moves its counts (no rows are added: every second reads the same
  results);
- the viewer asks for what the page shows of the run's results twice (the
  page, then its live update): the summary and charts
  (``figures.run_figures``) and the scorers' table of the progress block
  (``summary.run_scorer_summaries_cached``).

The clock that a going run's keys count by (``cache_keys.going_second``) is
played, not waited for. Prints the CPU seconds of the whole, per played
second, and how many times each figure was computed.

    .venv/bin/python bench/going_figures.py                        # 100,000 items
    .venv/bin/python bench/going_figures.py --source /tmp/before   # older code
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from analysis_bench import run_in_scratch, seed_analysis


def counted(module: Any, name: str, seen: Counter[str]) -> None:
    """Count the calls of ``module.name`` (looked up at each call)."""
    function: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen[name] += 1
        return function(*args, **kwargs)

    setattr(module, name, wrapper)


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    seeded = seed_analysis(items=args.items)

    from runs.analysis import charts, figures, summary
    from runs.models import Run, RunStatus
    from runs.records import cache_keys

    Run.objects.filter(pk=seeded.baseline.pk).update(
        status=RunStatus.RUNNING, finished_at=None
    )
    seen: Counter[str] = Counter()
    counted(summary, "run_summary", seen)
    counted(summary, "run_scorer_summaries", seen)
    counted(charts, "run_charts", seen)
    played = [0]
    cache_keys.going_second = lambda: played[0]  # type: ignore[assignment]

    began = time.process_time()
    for second in range(args.seconds):
        played[0] = second
        Run.objects.filter(pk=seeded.baseline.pk).update(
            succeeded=seeded.baseline.succeeded + (second + 1) * args.batch
        )
        run = Run.objects.get(pk=seeded.baseline.pk)
        for _ in range(2):
            figures.run_figures(run=run)
            summary.run_scorer_summaries_cached(run=run)
    spent = time.process_time() - began
    print(
        f"load {os.getloadavg()[0]:.1f}; {args.items:,} results, "
        f"{args.seconds} seconds played: {spent:.2f} s of CPU, "
        f"{spent / args.seconds:.3f} s a second"
    )
    print(
        "computed: "
        + ", ".join(f"{name} {count}" for name, count in sorted(seen.items()))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--source", help="measure another checkout's code")
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()

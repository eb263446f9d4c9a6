"""Benchmarks of evalsite's executor, end to end, as a person runs them.

    python bench/run.py                      # every scenario
    python bench/run.py latency faults       # some of them
    python bench/run.py --json-out bench.json

Each scenario migrates a fresh SQLite database in a temporary directory, writes
a JSONL dataset of arithmetic items, starts the local fake OpenAI server in its
own process, runs ``manage.py evalrun ... --json`` in another process, and then
reads the stored results back from the database to check them. The peak memory
of the evalrun process alone comes from ``wait4``.

A missed speed or memory goal is reported as "below goal"; the exit status is
non-zero only when a consistency check fails (counts, one result per item and
epoch, exit codes). Figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import harness
from harness import SCORER, Case, Settings, run_case

FINISHED = ("completed", "completed_with_errors")


# -- result shapes -------------------------------------------------------------


@dataclass
class Figure:
    name: str
    value: Any
    unit: str = ""
    goal: str = ""
    met: bool | None = None


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class ScenarioResult:
    scenario: str
    description: str
    figures: list[Figure] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


def consistency_checks(case: Case, *, epochs: int = 1) -> list[Check]:
    """Checks that hold for every run that ends, whatever the server did."""
    child, stored, summary = case.child, case.stored, case.child.summary or {}
    expected_total = case.items * epochs
    exited_ok = child.exit_code == 0 and not child.killed_by_watchdog
    checks = [
        Check(
            "evalrun exits 0 with a JSON summary",
            exited_ok and bool(summary),
            f"exit {child.exit_code}"
            + (", stopped by the watchdog" if child.killed_by_watchdog else "")
            + (f"; run error: {stored['run_error']}" if stored.get("run_error") else "")
            + ("" if exited_ok else f"; stderr: {child.stderr.strip()[-600:]}"),
        )
    ]
    if not summary:
        return checks
    counted = sum(
        summary.get(key, 0)
        for key in ("succeeded", "failed", "timed_out", "cancelled", "skipped")
    )
    status_counts = stored.get("status_counts", {})
    stored_counts = {
        key: status_counts.get(key, 0)
        for key in ("succeeded", "failed", "timed_out", "cancelled")
    }
    reported = {key: summary.get(key) for key in stored_counts}
    checks += [
        Check(
            "run finished",
            summary.get("status") in FINISHED,
            f"status {summary.get('status')}",
        ),
        Check(
            "total is items x epochs",
            summary.get("total") == expected_total,
            f"total {summary.get('total')}, expected {expected_total}",
        ),
        Check(
            "succeeded+failed+timed_out+cancelled+skipped == total",
            counted == summary.get("total"),
            f"{counted} == {summary.get('total')}",
        ),
        Check(
            "stored results == total",
            stored.get("results") == summary.get("total"),
            f"{stored.get('results')} rows for total {summary.get('total')}",
        ),
        Check(
            "one result per (item, epoch)",
            stored.get("duplicate_count") == 0,
            f"{stored.get('duplicate_count')} (item, epoch) pairs with != 1 result"
            + (f", e.g. {stored['duplicates']}" if stored.get("duplicates") else ""),
        ),
        Check(
            "reported counts match stored rows",
            stored_counts == reported,
            f"stored {stored_counts}, reported {reported}",
        ),
        Check(
            "dataset holds every item",
            stored.get("dataset_items") == case.items,
            f"{stored.get('dataset_items')} items stored for {case.items} written",
        ),
    ]
    return checks


def clean_run_checks(case: Case) -> list[Check]:
    """Without faults every item succeeds and every answer is right."""
    summary = case.child.summary or {}
    score = (summary.get("scores") or {}).get(SCORER)
    return [
        Check(
            "all succeeded, status completed",
            summary.get("status") == "completed"
            and summary.get("succeeded") == summary.get("total"),
            f"{summary.get('succeeded')}/{summary.get('total')} succeeded,"
            f" status {summary.get('status')}",
        ),
        Check(f"{SCORER} mean is 1.0", score == 1.0, f"{SCORER} {score}"),
    ]


def case_details(case: Case) -> dict[str, Any]:
    child = case.child
    return {
        "items": case.items,
        "concurrency": case.concurrency,
        "summary": child.summary,
        "exit_code": child.exit_code,
        "stderr_tail": child.stderr[-4000:],
        "peak_rss_kib": child.peak_rss_kib,
        "cpu_seconds": round(child.cpu_seconds, 3),
        "process_seconds": round(child.process_seconds, 3),
        "server_cpu_seconds": _round(case.server_cpu_seconds),
        "stored": case.stored,
        "command": " ".join(child.argv[1:]),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def wall_of(case: Case) -> float | None:
    wall = (case.child.summary or {}).get("wall_seconds")
    return float(wall) if isinstance(wall, int | float) and wall > 0 else None


def scaled(settings: Settings, count: int) -> int:
    return max(1, round(count * settings.scale))


# -- scenarios -----------------------------------------------------------------


def cpu_figures(case: Case) -> list[Figure]:
    """CPU per item of evalrun (start-up included) and of the fake server.

    CPU time moves much less than wall time with the machine's other load.
    """
    items = max(case.items, 1)
    server = case.server_cpu_seconds
    return [
        Figure("evalrun CPU time", round(case.child.cpu_seconds, 3), "s"),
        Figure(
            "evalrun CPU per item",
            round(case.child.cpu_seconds / items * 1000, 3),
            "ms",
        ),
        Figure(
            "fake server CPU per item",
            None if server is None else round(server / items * 1000, 3),
            "ms",
        ),
    ]


def latency_case(
    settings: Settings,
    name: str,
    *,
    items: int,
    concurrency: int,
    goal: float,
    latency_ms: int = 100,
) -> ScenarioResult:
    case = run_case(
        settings,
        name,
        items=items,
        concurrency=concurrency,
        server_options=["--latency-ms", str(latency_ms)],
    )
    limit = items * latency_ms / 1000 / case.concurrency
    wall = wall_of(case)
    efficiency = limit / wall if wall else None
    result = ScenarioResult(
        name,
        f"{items} items, server latency {latency_ms} ms,"
        f" concurrency {case.concurrency}",
    )
    result.figures = [
        Figure("wall_seconds (run)", wall, "s"),
        Figure("physical limit", round(limit, 3), "s"),
        Figure(
            "efficiency = limit / wall",
            round(efficiency, 3) if efficiency else None,
            goal=f">= {goal}",
            met=efficiency is not None and efficiency >= goal,
        ),
        Figure("process wall time", round(case.child.process_seconds, 3), "s"),
        *cpu_figures(case),
        Figure("peak RSS", case.child.peak_rss_kib, "KiB"),
    ]
    result.checks = consistency_checks(case) + clean_run_checks(case)
    result.details = case_details(case) | {"limit_seconds": limit}
    return result


def scenario_latency(settings: Settings) -> ScenarioResult:
    return latency_case(
        settings,
        "latency",
        items=scaled(settings, 2_000),
        concurrency=64,
        goal=0.92,
    )


def scenario_latency256(settings: Settings) -> ScenarioResult:
    return latency_case(
        settings,
        "latency256",
        items=scaled(settings, 10_000),
        concurrency=256,
        goal=0.9,
    )


def scenario_latency1024(settings: Settings) -> ScenarioResult:
    return latency_case(
        settings,
        "latency1024",
        items=scaled(settings, 20_000),
        concurrency=1024,
        goal=0.9,
        latency_ms=1000,
    )


def scenario_throughput(settings: Settings) -> ScenarioResult:
    items = scaled(settings, 20_000)
    case = run_case(
        settings, "throughput", items=items, concurrency=64, server_options=[]
    )
    wall = wall_of(case)
    rate = items / wall if wall else None
    result = ScenarioResult(
        "throughput",
        f"{items} items, no latency, concurrency {case.concurrency}",
    )
    result.figures = [
        Figure("wall_seconds (run)", wall, "s"),
        Figure(
            "items per second",
            round(rate, 1) if rate else None,
            "/s",
            goal=">= 2000",
            met=rate is not None and rate >= 2000,
        ),
        Figure("process wall time", round(case.child.process_seconds, 3), "s"),
        *cpu_figures(case),
        Figure("fake server CPU time", _round(case.server_cpu_seconds), "s"),
        Figure("stored results", case.stored.get("results"), "rows"),
        Figure("peak RSS", case.child.peak_rss_kib, "KiB"),
    ]
    result.checks = [
        *consistency_checks(case),
        *clean_run_checks(case),
        Check(
            f"{items} results stored for the run",
            case.stored.get("results") == items,
            f"{case.stored.get('results')} rows",
        ),
    ]
    result.details = case_details(case)
    return result


def scenario_memory(settings: Settings) -> ScenarioResult:
    small, large = scaled(settings, 10_000), scaled(settings, 100_000)
    cases = [
        run_case(settings, f"memory-{n}", items=n, concurrency=64, server_options=[])
        for n in (small, large)
    ]
    peaks = [case.child.peak_rss_kib for case in cases]
    ratio = peaks[1] / peaks[0] if peaks[0] else None
    result = ScenarioResult(
        "memory",
        f"peak RSS of evalrun at {small} and {large} items, no latency,"
        f" concurrency {cases[0].concurrency}",
    )
    for case in cases:
        wall = wall_of(case)
        result.figures += [
            Figure(f"peak RSS at {case.items}", case.child.peak_rss_kib, "KiB"),
            Figure(f"wall_seconds at {case.items}", wall, "s"),
            Figure(
                f"items per second at {case.items}",
                round(case.items / wall, 1) if wall else None,
                "/s",
            ),
        ]
        result.checks += [
            Check(f"[{case.items}] {c.name}", c.ok, c.detail)
            for c in consistency_checks(case) + clean_run_checks(case)
        ]
    result.figures.append(
        Figure(
            f"RSS ratio {large}/{small}",
            round(ratio, 3) if ratio else None,
            goal="<= 1.5",
            met=ratio is not None and ratio <= 1.5,
        )
    )
    result.details = {str(case.items): case_details(case) for case in cases}
    return result


def scenario_faults(settings: Settings) -> ScenarioResult:
    items = scaled(settings, 2_000)
    server_options = [
        *("--error-500", "0.1", "--error-429", "0.1", "--retry-after", "1"),
        *("--hang", "0.01", "--malformed", "0.01", "--seed", "1"),
    ]
    evalrun_options = ["--timeout", "2", "--max-attempts", "4"]
    case = run_case(
        settings,
        "faults",
        items=items,
        concurrency=64,
        server_options=server_options,
        evalrun_options=evalrun_options,
    )
    summary, stored = case.child.summary or {}, case.stored
    result = ScenarioResult(
        "faults",
        f"{items} items; 10% 500, 10% 429 (Retry-After: 1), 1% hang,"
        f" 1% malformed; concurrency {case.concurrency}, timeout 2 s,"
        " max attempts 4",
    )
    result.figures = [
        Figure("status", summary.get("status")),
        *(
            Figure(key, summary.get(key))
            for key in (
                "total",
                "succeeded",
                "failed",
                "timed_out",
                "cancelled",
                "skipped",
            )
        ),
        Figure("wall_seconds (run)", wall_of(case), "s"),
        Figure("attempts, total", stored.get("attempts_total")),
        Figure("results by attempts", stored.get("attempts_per_result")),
        Figure("results by status/error_kind", stored.get("by_status")),
        Figure(f"{SCORER} mean", (summary.get("scores") or {}).get(SCORER)),
    ]
    result.checks = consistency_checks(case)
    result.details = case_details(case) | {
        "server_options": server_options,
        "evalrun_options": evalrun_options,
    }
    return result


SCENARIOS: dict[str, Callable[[Settings], ScenarioResult]] = {
    "latency": scenario_latency,
    "latency256": scenario_latency256,
    "latency1024": scenario_latency1024,
    "throughput": scenario_throughput,
    "faults": scenario_faults,
    "memory": scenario_memory,
}


# -- reporting -----------------------------------------------------------------


def show(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
    return "-" if value is None else str(value)


def render(result: ScenarioResult) -> str:
    lines = [f"== {result.scenario}: {result.description}"]
    width = max((len(f.name) for f in result.figures), default=0)
    for figure in result.figures:
        value = f"{show(figure.value)} {figure.unit}".rstrip()
        verdict = ""
        if figure.goal:
            verdict = f"  (goal {figure.goal}: "
            verdict += "met)" if figure.met else "below goal)"
        lines.append(f"  {figure.name:<{width}}  {value}{verdict}")
    for check in result.checks:
        mark = "ok  " if check.ok else "FAIL"
        lines.append(f"  [{mark}] {check.name}: {check.detail}")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "max_rss_unit": "KiB",
        "page_size": resource.getpagesize(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run evalsite's benchmarks, one scenario at a time."
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help=f"any of {', '.join(SCENARIOS)} (default: all, in that order)",
    )
    parser.add_argument("--json-out", type=Path, help="write all results as JSON")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every item count (e.g. 0.1 for a quick try)",
    )
    parser.add_argument(
        "--concurrency", type=int, help="override every scenario's concurrency"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=1800.0,
        help="stop an evalrun that takes longer (counts as a failed check)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run evalrun under cProfile and write DIR/<case>.prof",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary data directories"
    )
    parser.add_argument("--seed", type=int, default=0, help="dataset seed")
    parser.add_argument(
        "--source",
        type=Path,
        metavar="DIR",
        help=(
            "run evalrun and the fake server from another checkout (an export "
            "of an older commit, say), with this harness and interpreter"
        ),
    )
    parser.add_argument(
        "--database",
        metavar="URL",
        help=(
            "a PostgreSQL server (postgres://user@host:port/db): each case runs on "
            "a scratch database created there and dropped (default: SQLite)"
        ),
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for migrate and evalrun (repeatable)",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; choose from {list(SCENARIOS)}")
    if args.database and not args.database.startswith(("postgres://", "postgresql://")):
        parser.error(f"--database takes a postgres:// URL, not {args.database!r}")
    bad_env = [pair for pair in args.env if "=" not in pair]
    if bad_env:
        parser.error(f"--env takes NAME=VALUE, not {bad_env[0]!r}")
    if args.source is not None:
        if not (args.source / "manage.py").is_file():
            parser.error(f"--source {args.source} has no manage.py")
        harness.ROOT = args.source.resolve()
    settings = Settings(
        python=sys.executable,
        scale=args.scale,
        concurrency=args.concurrency,
        max_seconds=args.max_seconds,
        keep=args.keep,
        profile_dir=args.profile,
        seed=args.seed,
        extra_env=dict(pair.split("=", 1) for pair in args.env),
        database=args.database,
    )
    results: list[ScenarioResult] = []
    for name in args.scenarios or list(SCENARIOS):
        result = SCENARIOS[name](settings)
        results.append(result)
        print(render(result) + "\n", flush=True)
    failed = [r.scenario for r in results if not r.ok]
    below = [
        f"{r.scenario}: {f.name}" for r in results for f in r.figures if f.met is False
    ]
    print("checks: " + (f"FAILED in {', '.join(failed)}" if failed else "all ok"))
    print("goals: " + (f"below goal: {'; '.join(below)}" if below else "all met"))
    if args.json_out is not None:
        report = {
            "finished_at": datetime.now(UTC).isoformat(),
            "machine": machine(),
            "options": {
                "scale": args.scale,
                "concurrency": args.concurrency,
                "seed": args.seed,
                "env": sorted(settings.extra_env),
                "profiled": args.profile is not None,
                "database": "postgresql" if args.database else "sqlite",
                "source": str(harness.ROOT),
            },
            "scenarios": [asdict(r) | {"ok": r.ok} for r in results],
        }
        args.json_out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("[bench] interrupted", file=sys.stderr)
        sys.exit(130)

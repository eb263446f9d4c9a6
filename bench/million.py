"""A million items: import, run, pages, comparison, export and storage, timed.

On a scratch database (a temporary SQLite file, or with ``DATABASE_URL`` a
scratch PostgreSQL database created on that server and dropped at the end;
``analysis_bench.run_in_scratch``):

1. writes a JSONL dataset of ``--items`` arithmetic items (``harness.write_dataset``);
2. imports it with ``manage.py import_dataset`` in its own process: wall and
   CPU time, peak resident memory (``wait4``);
3. runs it with ``manage.py evalrun`` against the offline ``demo`` target at
   no latency (an endpoint that answers at once; 1% of calls fail, without a
   retry, so that error filters and clusters have rows), scorer
   ``exact_match``: items a second over the run phase, CPU per item, peak RSS;
4. makes a second run of the same items by copying the first one's rows in
   SQL (a tenth of its verdicts flipped), and stores its figures as the
   executor does when a run ends;
5. times, in this process with Django's test client and every cache cleared
   before each request, the run page, the summary, the clusters, a results
   page with each filter (page and API, first and last page), the comparison
   of the two runs, and the export streamed to its end (with this process's
   peak RSS above what it held before, from ``VmHWM``, reset through
   ``/proc/self/clear_refs``);
6. reports the database's size and its bytes per result and per score
   (``bench/storage.py``).

    .venv/bin/python bench/million.py                       # SQLite, 1,000,000 items
    .venv/bin/python bench/million.py --items 20000         # a quick try
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/million.py                   # PostgreSQL
    .venv/bin/python bench/million.py --json-out million.json
    .venv/bin/python bench/million.py --keep        # then, after a change to a page:
    .venv/bin/python bench/million.py --pages-only /tmp/evalsite-analysis-bench-...
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_analysis_bench_NNN \\
        .venv/bin/python bench/million.py --pages-only /tmp/evalsite-analysis-bench-...
    .venv/bin/python bench/million.py --pages-only DIR --migrate   # new indexes
    .venv/bin/python bench/million.py --pages-only DIR --only verdict --profile 25

Each results filter is timed on its first and its last page, on the page and
in the API (the last page's number from the API's count).

Each figure is printed with the machine's load average when it was taken:
on a shared machine the CPU figures move less than the wall figures. A page's
CPU is this process's (``cpu_s``: on SQLite, the database's work too) and, on
a PostgreSQL server on the same machine, its server process's (``db_cpu_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_bench import run_in_scratch
from harness import ROOT, run_measured, write_dataset

USERNAME = "bench"
PROJECT = "Million"
RESULTS_PER_PAGE = 50
# Extra environment of the import and evalrun processes (--env).
CHILD_ENV: dict[str, str] = {}


@dataclass
class Figure:
    what: str
    value: float | None
    unit: str
    goal: str = ""
    verdict: str = ""
    load: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


class Report:
    """Figures printed as they come, and written as JSON at the end."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.figures: list[Figure] = []

    def add(
        self,
        what: str,
        value: float | None,
        unit: str,
        *,
        goal: float | None = None,
        below: bool = True,
        **detail: Any,
    ) -> Figure:
        verdict = ""
        if goal is not None and value is not None:
            met = value <= goal if below else value >= goal
            verdict = "ok" if met else "MISSED"
        shown_goal = "" if goal is None else f"{'<=' if below else '>='} {goal:g}"
        figure = Figure(
            what, value, unit, shown_goal, verdict, os.getloadavg()[0], detail
        )
        self.figures.append(figure)
        number = "-" if value is None else f"{value:,.3f}"
        extra = " ".join(f"{k}={v}" for k, v in detail.items())
        print(
            f"{what:48} {number:>14} {unit:8} {shown_goal:>10} {verdict:6} "
            f"load {figure.load:4.2f}  {extra}",
            flush=True,
        )
        return figure

    def dump(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {"database": self.label, "figures": [asdict(f) for f in self.figures]},
                indent=2,
            )
        )


# -- processes ---------------------------------------------------------------------


def manage(*args: str, max_seconds: float) -> Any:
    child = run_measured(
        [sys.executable, "manage.py", *args],
        env=dict(os.environ) | CHILD_ENV,
        max_seconds=max_seconds,
    )
    if child.exit_code:
        raise SystemExit(f"manage.py {args[0]} failed:\n{child.stderr[-3000:]}")
    return child


def import_phase(report: Report, path: Path, items: int, args: Any) -> None:
    child = manage(
        "import_dataset",
        str(path),
        "--project",
        PROJECT,
        "--name",
        "million",
        max_seconds=args.max_seconds,
    )
    report.add(
        f"import {items:,} items: process wall",
        child.process_seconds,
        "s",
        goal=60,
        cpu_s=round(child.cpu_seconds, 1),
    )
    report.add("import: peak RSS", child.peak_rss_kib / 1024, "MiB")


def run_phase(report: Report, path: Path, items: int, args: Any) -> int:
    child = manage(
        "evalrun",
        str(path),
        "--user",
        USERNAME,
        "--project",
        PROJECT,
        "--dataset-name",
        "million",
        "--name",
        "first",
        "--target",
        "demo",
        "--target-config",
        json.dumps(
            {
                "min_latency_ms": 0,
                "max_latency_ms": 0,
                "accuracy": 0.8,
                "transient_error_rate": 0.01,
            }
        ),
        "--max-attempts",
        "1",
        "--scorer",
        "exact_match",
        "--concurrency",
        str(args.concurrency),
        "--json",
        max_seconds=args.max_seconds,
    )
    summary = child.summary or {}
    wall = summary.get("wall_seconds")
    run_id = summary.get("run_id") or summary.get("id")
    report.add(
        "run: items a second (run phase, embedded)",
        items / wall if wall else None,
        "items/s",
        goal=2000,
        below=False,
        wall_s=wall,
        process_s=round(child.process_seconds, 1),
    )
    report.add(
        "run: evalrun CPU per item (import and start-up in)",
        1000 * child.cpu_seconds / items,
        "ms",
        cpu_s=round(child.cpu_seconds, 1),
    )
    report.add("run: evalrun peak RSS", child.peak_rss_kib / 1024, "MiB")
    if not run_id:
        raise SystemExit(f"evalrun printed no run id: {summary}")
    return int(run_id)


# -- the second run, copied in SQL --------------------------------------------------


def copy_run(run_id: int) -> int:
    """A second run of the same items: the first one's rows copied, a tenth of
    its verdicts flipped, its figures stored as the executor stores them."""
    from django.db import connection, transaction

    from runs.analysis.figures import run_figures_store
    from runs.models import Result, Run, Score, ScoringPass

    run = Run.objects.get(pk=run_id)
    result_columns = [
        str(f.column) for f in Result._meta.concrete_fields if f.column != "id"
    ]
    score_columns = [
        str(f.column) for f in Score._meta.concrete_fields if f.column != "id"
    ]
    with transaction.atomic():
        run.pk = None
        run._state.adding = True
        run.name = "second"
        run.save()
        for scoring_pass in ScoringPass.objects.filter(run_id=run_id):
            scoring_pass.pk = None
            scoring_pass._state.adding = True
            scoring_pass.run_id = run.pk
            scoring_pass.save()
        new = run.pk
        with connection.cursor() as cursor:
            cols = ", ".join(result_columns)
            picked = ", ".join("%s" if c == "run_id" else c for c in result_columns)
            cursor.execute(
                f"INSERT INTO runs_result ({cols}) SELECT {picked} "
                "FROM runs_result WHERE run_id = %s",
                [new, run_id],
            )
            cols = ", ".join(score_columns)
            picked = ", ".join(
                "b.id" if c == "result_id" else f"s.{c}" for c in score_columns
            )
            cursor.execute(
                f"INSERT INTO runs_score ({cols}) SELECT {picked} "
                "FROM runs_score s JOIN runs_result a ON a.id = s.result_id "
                "JOIN runs_result b ON b.run_id = %s AND b.item_id = a.item_id "
                "AND b.epoch = a.epoch WHERE a.run_id = %s",
                [new, run_id],
            )
            cursor.execute(
                "UPDATE runs_score SET passed = NOT passed, value = 1 - value "
                "WHERE passed IS NOT NULL AND result_id IN (SELECT id FROM "
                "runs_result WHERE run_id = %s AND item_index %% 10 = 3)",
                [new],
            )
    run_figures_store(new)
    return new


# -- pages ---------------------------------------------------------------------------


def _drain(response: Any) -> int:
    if response.streaming:
        return sum(len(part) for part in response.streaming_content)
    return len(response.content)


def _clear_caches() -> None:
    from django.core.cache import caches

    for cache in caches.all():
        cache.clear()


def _server_cpu() -> float | None:
    """CPU seconds of this connection's PostgreSQL server process, when it
    runs on this machine (None on SQLite, which works in this process)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # utime and stime, the 14th and 15th fields (the 12th and 13th after the name).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_get(
    client: Any, url: str, repeat: int
) -> tuple[int, float, float, int, float | None]:
    """Status, best wall and its CPU time (this process's, and the database
    server's on PostgreSQL), bytes: caches cleared before each GET."""
    best: tuple[int, float, float, int, float | None] = (0, float("inf"), 0, 0, None)
    for _ in range(repeat):
        _clear_caches()
        server = _server_cpu()
        began, cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        size = _drain(response)
        took = (response.status_code, time.perf_counter() - began)
        used = time.process_time() - cpu
        after = _server_cpu()
        served = after - server if after is not None and server is not None else None
        if took[1] < best[1]:
            best = (took[0], took[1], used, size, served)
        if response.status_code != 200:
            break
    return best


def _vm(name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0


def streamed_peak(client: Any, url: str) -> tuple[int, float, int, float]:
    """Status, seconds, bytes, and this process's peak RSS above its RSS before."""
    _clear_caches()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM
    before = _vm("VmRSS")
    began = time.perf_counter()
    response = client.get(url)
    size = _drain(response)
    return (
        response.status_code,
        time.perf_counter() - began,
        size,
        (_vm("VmHWM") - before) / 1024,
    )


def cluster_key(client: Any, run_id: int) -> str | None:
    response = client.get(f"/api/v1/runs/{run_id}/clusters")
    if response.status_code != 200:
        return None

    def first_key(value: Any) -> str | None:
        if isinstance(value, dict):
            if value.get("key"):
                return str(value["key"])
            values = list(value.values())
        elif isinstance(value, list):
            values = value
        else:
            return None
        for inner in values:
            if found := first_key(inner):
                return found
        return None

    return first_key(response.json())


def _profile_top(client: Any, url: str, lines: int) -> str:
    """The calls of one GET (caches cleared) that took the most time, cProfile's."""
    import cProfile
    import io
    import pstats

    _clear_caches()
    profile = cProfile.Profile()
    profile.enable()
    _drain(client.get(url))
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(lines)
    return out.getvalue()


def _count(client: Any, url: str) -> int | None:
    response = client.get(url)
    if response.status_code != 200:
        return None
    return int(response.json()["count"])


def results_pages(client: Any, a: int, items: int) -> list[tuple[str, str, float]]:
    """Each filter's first and last page, on the page and in the API; the
    last page's number from the API's count."""
    from urllib.parse import quote

    key = cluster_key(client, a)
    filters = [
        "",
        "status=succeeded",
        "status=failed",
        "status=timed_out",
        "status=cancelled",
        "status=pending",
        "status=skipped",
        "error_kind=transient",
        "scorer=exact_match&verdict=passed",
        "scorer=exact_match&verdict=failed",
        "scorer=exact_match&verdict=errored",
        "scorer=exact_match&verdict=skipped",
        f"external_id=q{items // 2}",
        "status=succeeded&scorer=exact_match&verdict=failed",
        "error_kind=transient&scorer=exact_match&verdict=failed",
    ]
    if key:
        filters.append(f"cluster={quote(key)}")
    pages = []
    for query in filters:
        shown = f"?{query}" if query else "(no filter)"
        pages.append((f"results page {shown}", f"/runs/{a}/?{query}", 0.3))
        pages.append((f"results API {shown}", f"/api/v1/runs/{a}/results?{query}", 0.3))
        count = _count(client, f"/api/v1/runs/{a}/results?{query}")
        last = -(-(count or 0) // RESULTS_PER_PAGE)
        if last > 1:
            at = f"{query}&page={last}" if query else f"page={last}"
            pages.append((f"results page {shown}, last page", f"/runs/{a}/?{at}", 0.3))
            pages.append(
                (
                    f"results API {shown}, last page",
                    f"/api/v1/runs/{a}/results?{at}",
                    0.3,
                )
            )
        if not query:
            middle = max(last // 2, 1)
            pages.append(
                (
                    "results page (no filter), middle page",
                    f"/runs/{a}/?page={middle}",
                    0.3,
                )
            )
    return pages


def page_phase(report: Report, a: int, b: int, items: int, args: Any) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username=USERNAME))
    pages = [
        ("run page", f"/runs/{a}/", 0.5),
        ("summary API", f"/api/v1/runs/{a}/summary", 0.5),
        ("clusters API", f"/api/v1/runs/{a}/clusters", 0.5),
        ("clusters page", f"/runs/{a}/clusters/", 0.5),
        ("clusters API vs baseline", f"/api/v1/runs/{b}/clusters?baseline={a}", 0.5),
        ("clusters page vs baseline", f"/runs/{b}/clusters/?baseline={a}", 0.5),
        ("comparison API", f"/api/v1/compare?baseline={a}&candidates={b}", 2.0),
        ("comparison page", f"/compare/?baseline={a}&candidates={b}", 2.0),
        *results_pages(client, a, items),
    ]
    for what, url, goal in pages:
        if args.only and not any(word in what for word in args.only):
            continue
        status, seconds, cpu, size, served = timed_get(client, url, args.repeat)
        if status != 200:
            report.add(what, None, "s", goal=goal, http=status, url=url)
            continue
        server = {} if served is None else {"db_cpu_s": round(served, 3)}
        report.add(
            what, seconds, "s", goal=goal, cpu_s=round(cpu, 3), **server, bytes=size
        )
        if args.profile:
            print(_profile_top(client, url, args.profile), flush=True)
    if args.no_export or args.only:
        return
    for fmt in ("csv", "jsonl"):
        status, seconds, size, peak = streamed_peak(
            client, f"/api/v1/runs/{a}/export?format={fmt}"
        )
        report.add(
            f"export {fmt}, streamed to the end",
            seconds,
            "s",
            http=status,
            mib=round(size / 2**20, 1),
        )
        report.add(f"export {fmt}: peak RSS above before", peak, "MiB")


# -- the whole bench -----------------------------------------------------------------


def bench(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command

    report = Report(args.label)
    print(f"{args.label}: {args.items:,} items", flush=True)
    data_dir = Path(os.environ["EVALSITE_DATA_DIR"])
    path = write_dataset(data_dir / "million.jsonl", args.items, args.seed)
    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User

    from runs.projects.services import project_create

    user = User.objects.create_user(USERNAME, "bench@example.org", None)
    project_create(name=PROJECT, owner=user)
    try:
        if not args.no_import:
            import_phase(report, path, args.items, args)
        first = run_phase(report, path, args.items, args)
        began = time.perf_counter()
        second = copy_run(first)
        report.add(
            "second run copied in SQL, figures stored", time.perf_counter() - began, "s"
        )
        if args.analyze:
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        page_phase(report, first, second, args.items, args)
        storage_phase(report, first)
    finally:
        if args.json_out:
            report.dump(args.json_out)


def pages_again(args: argparse.Namespace) -> None:
    """The page phase alone, on the database a run with ``--keep`` left."""
    import django

    os.environ["EVALSITE_DATA_DIR"] = str(args.pages_only)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    django.setup()
    from django.db import connection

    from runs.models import Run

    where = os.environ.get("DATABASE_URL", "").rsplit("/", 1)[-1] or args.pages_only
    report = Report(f"kept database {where} ({connection.vendor})")
    if args.migrate:
        from django.core.management import call_command

        began, cpu = time.perf_counter(), time.process_time()
        call_command("migrate", verbosity=1)
        report.add(
            "migrate the kept database",
            time.perf_counter() - began,
            "s",
            cpu_s=round(time.process_time() - cpu, 1),
        )
    first = Run.objects.get(name="first")
    second = Run.objects.get(name="second")
    print(f"{report.label}: runs {first.pk} and {second.pk}", flush=True)
    from runs.analysis.figures import run_figures_store

    for run in (first, second):
        # What the executor stores when a run ends; computed here only what
        # is missing (a database kept from before a new stored figure).
        began, cpu = time.perf_counter(), time.process_time()
        run_figures_store(run.pk)
        report.add(
            f"run {run.pk}: stored figures read, or computed and stored",
            time.perf_counter() - began,
            "s",
            cpu_s=round(time.process_time() - cpu, 1),
        )
    try:
        page_phase(report, first.pk, second.pk, first.total, args)
        if not args.only:
            storage_phase(report, first.pk)
    finally:
        if args.json_out:
            report.dump(args.json_out)


def storage_phase(report: Report, run_id: int) -> None:
    from storage import storage_figures

    for what, value, unit in storage_figures(run_id):
        report.add(what, value, unit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=3600)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="ANALYZE before the pages (autovacuum would, some time after)",
    )
    parser.add_argument(
        "--no-import",
        action="store_true",
        help="skip the timed import (evalrun imports the file in any case)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment of the import and evalrun processes, e.g. "
        "EVALSITE_MAX_PARSE_SECONDS=3600 on a loaded machine",
    )
    parser.add_argument(
        "--pages-only",
        type=Path,
        metavar="DATA_DIR",
        help="time the pages again on the database that --keep left (after a "
        "change to them): the SQLite file in DATA_DIR, or with DATABASE_URL "
        "naming the kept PostgreSQL database, that one (DATA_DIR holds its keys)",
    )
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="with --pages-only: apply new migrations first, timed",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="WORDS",
        help="time only the pages whose label contains WORDS (repeatable); "
        "no export, no storage",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="LINES",
        help="after each page, print its LINES costliest calls (cProfile)",
    )
    parser.add_argument(
        "--no-export", action="store_true", help="skip the streamed exports"
    )
    args = parser.parse_args()
    if args.pages_only:
        os.chdir(ROOT)
        pages_again(args)
        return
    CHILD_ENV.update(item.split("=", 1) for item in args.env)
    os.chdir(ROOT)
    run_in_scratch(bench, args)


if __name__ == "__main__":
    main()

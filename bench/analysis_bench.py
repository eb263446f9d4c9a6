"""Server time of the analysis pages and endpoints on two runs of 100,000 items.

Builds a scratch database (a temporary SQLite file, or with ``DATABASE_URL`` a
scratch PostgreSQL database created on that server and dropped at the end;
never the database the URL names), fills it quickly with two finished runs of
one dataset (bulk writes through the executor's own store), then times GET
requests with Django's in-process test client, best of ``--repeat``, and prints
each against its goal. A URL that does not resolve prints ``missing``.

    .venv/bin/python bench/analysis_bench.py                  # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite \\
        .venv/bin/python bench/analysis_bench.py              # PostgreSQL
    .venv/bin/python bench/analysis_bench.py --items 10000    # a quick try
    .venv/bin/python bench/analysis_bench.py --source /tmp/before  # older code

Caches are cleared before every request: the figures are those of a first
view (a repeated view of a finished run is served from cache). A run's
summary and chart data are computed when it ends and stored with it, as the
executor does (``runs/analysis/figures.py``); that time is printed apart.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from layout import imported

ROOT = Path(__file__).resolve().parent.parent
BATCH = 5000
USERNAME = "bench"
# Seconds each run's figures took to compute and store when it ended.
FIGURES_SECONDS: list[float] = []

# (label, URL template, goal in seconds or None); {a} is the baseline run,
# {b} the candidate.
URLS: list[tuple[str, str, float | None]] = [
    ("run page", "/runs/{a}/", 0.5),
    ("run page, status=failed", "/runs/{a}/?status=failed", 0.5),
    ("run page, last results page", "/runs/{a}/?page=2000", 0.5),
    ("summary API", "/api/v1/runs/{a}/summary", 0.5),
    ("comparison API", "/api/v1/compare?baseline={a}&candidates={b}", 1.0),
    ("comparison page", "/compare/?baseline={a}&candidates={b}", 1.0),
    ("clusters API", "/api/v1/runs/{b}/clusters?baseline={a}", 0.5),
    ("clusters page", "/runs/{b}/clusters/", 0.5),
    ("export CSV, streamed to the end", "/api/v1/runs/{a}/export?format=csv", None),
    ("export JSONL, streamed to the end", "/api/v1/runs/{a}/export", None),
]


# -- scratch database ---------------------------------------------------------------


@dataclass
class Scratch:
    """Where the benchmark's database lives, and how to remove it."""

    label: str
    env: dict[str, str]
    drop: Callable[[], None]


def scratch_database(*, keep: bool) -> Scratch:
    """A temporary SQLite file, or a new PostgreSQL database on the same server."""
    data_dir = Path(tempfile.mkdtemp(prefix="evalsite-analysis-bench-"))
    env = {"EVALSITE_DATA_DIR": str(data_dir), "EVALSITE_DEBUG": "0"}

    def remove_dir() -> None:
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)

    url = os.environ.get("DATABASE_URL")
    if not url:
        return Scratch(f"SQLite ({data_dir})", env, remove_dir)

    import dj_database_url
    import psycopg

    config = dj_database_url.parse(url)
    if "postgres" not in config["ENGINE"]:
        raise SystemExit(
            "DATABASE_URL: only PostgreSQL (or no URL, SQLite) is supported"
        )
    name = f"evalsite_analysis_bench_{os.getpid()}"
    admin = {
        "host": config["HOST"] or None,
        "port": config["PORT"] or None,
        "user": config["USER"] or None,
        "password": config["PASSWORD"] or None,
        # The server's maintenance database: the URL's may not exist yet.
        "dbname": "postgres",
        "autocommit": True,
    }
    try:
        with psycopg.connect(**admin) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
    env["DATABASE_URL"] = url.rsplit("/", 1)[0] + f"/{name}"

    def drop() -> None:
        remove_dir()
        if keep:
            print(f"kept database {name}, its keys in {data_dir}")
            return
        with psycopg.connect(**admin) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return Scratch(f"PostgreSQL (scratch database {name})", env, drop)


# -- seeding ---------------------------------------------------------------------------

TOPICS = ["arithmetic", "geometry", "history", "chemistry", "law", "code"]


def bench_items(count: int, *, seed: int) -> list[dict[str, Any]]:
    """Questions with an expected answer and a little metadata."""
    rng = random.Random(seed)
    items = []
    for n in range(count):
        a, b = rng.randint(2, 9999), rng.randint(2, 9999)
        topic = rng.choice(TOPICS)
        items.append(
            {
                "id": f"{topic[:3]}-{n:06d}",
                "input": f"[{topic}] Work it out step by step, then give only the "
                f"number on the last line. What is {a} + {b}?",
                "expected": str(a + b),
                # Other fields of a record become the item's metadata.
                "topic": topic,
                "difficulty": rng.randint(1, 5),
            }
        )
    return items


def _hex(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))


def target_error(rng: random.Random, *, new_kind: bool) -> dict[str, Any]:
    """A failed or timed-out target call, with the varying details real
    endpoints put in their messages (request ids, token counts, URLs)."""
    choice = rng.randrange(7 if new_kind else 6)
    attempts = 1
    if choice == 0:
        fields = {
            "status": "failed",
            "error_kind": "quota",
            "error_type": "HTTP 429",
            "error_message": "Rate limit reached for gpt-4o-mini in organization "
            f"org-{_hex(rng, 12)} on tokens per min (TPM): Limit 200000, Used "
            f"{rng.randint(190000, 199999)}, Requested {rng.randint(200, 4000)}. "
            f"Please try again in {rng.randint(50, 2000)}ms. Visit "
            "https://platform.openai.com/account/rate-limits to learn more. "
            f"(request id req_{_hex(rng, 32)})",
        }
        attempts = 4
    elif choice == 1:
        fields = {
            "status": "failed",
            "error_kind": "transient",
            "error_type": "HTTP 500",
            "error_message": "Internal server error at "
            f"https://llm-{rng.randint(1, 9)}.internal.example.com:8443/v1/chat/"
            f"completions (request id {uuid.UUID(int=rng.getrandbits(128))})",
        }
        attempts = 4
    elif choice == 2:
        fields = {
            "status": "failed",
            "error_kind": "permanent",
            "error_type": "HTTP 400",
            "error_message": "This model's maximum context length is 8192 tokens. "
            f"However, your messages resulted in {rng.randint(8193, 30000)} tokens. "
            "Please reduce the length of the messages.",
        }
    elif choice == 3:
        fields = {
            "status": "timed_out",
            "error_kind": "timeout",
            "error_type": "TimeoutError",
            "error_message": f"no answer within 30.0 s (attempt 3 of 3, "
            f"{rng.randint(1, 64)} in flight)",
        }
        attempts = 3
    elif choice == 4:
        fields = {
            "status": "failed",
            "error_kind": "permanent",
            "error_type": "MalformedResponse",
            "error_message": "response is not JSON: Expecting value: line 1 column 1 "
            "(char 0); body starts '<html><head><title>502 Bad Gateway</title>' "
            f"from 10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}:8080",
        }
    elif choice == 5:
        fields = {
            "status": "failed",
            "error_kind": "transient",
            "error_type": "ConnectError",
            "error_message": "[Errno 111] Connection refused to "
            f"http://10.0.3.{rng.randint(1, 254)}:8000/v1/chat/completions after "
            f"{rng.uniform(0.1, 5):.2f}s",
        }
        attempts = 4
    else:
        fields = {
            "status": "failed",
            "error_kind": "permanent",
            "error_type": "ContentFilter",
            "error_message": "The response was filtered due to the prompt "
            f"triggering content management policy (id cf-{_hex(rng, 16)}, "
            f"'{rng.choice(['violence', 'self_harm', 'hate'])}')",
        }
    fields["attempts"] = [
        {"number": n, "outcome": "error", "latency_ms": rng.uniform(50, 3000)}
        for n in range(1, attempts + 1)
    ]
    fields["latency_ms"] = fields["attempts"][-1]["latency_ms"]
    return fields


@dataclass(frozen=True)
class Profile:
    """How a run behaves: shares of passes and of target errors."""

    pass_share: float
    error_share: float
    new_error_kind: bool
    seed: int


BASELINE = Profile(pass_share=0.75, error_share=0.05, new_error_kind=False, seed=1)
CANDIDATE = Profile(pass_share=0.78, error_share=0.04, new_error_kind=True, seed=2)


def result_record(
    item: Any, rng: random.Random, profile: Profile, when: datetime
) -> Any:
    """One result of ``item`` with two scores (exact_match, judge)."""
    from runs.executor.store import ResultRecord, ScoreRecord

    started = when - timedelta(milliseconds=rng.uniform(200, 4000))
    draw = rng.random()
    if draw < profile.error_share:
        return ResultRecord(
            item_id=item.pk,
            item_index=item.index,
            epoch=0,
            output=None,
            started_at=started,
            finished_at=when,
            **target_error(rng, new_kind=profile.new_error_kind),
        )
    passed = draw < profile.error_share + profile.pass_share
    answer = item.expected if passed else str(int(item.expected) + rng.randint(1, 99))
    output = f"{rng.choice(['Adding', 'Summing', 'We add'])} the numbers.\n{answer}"
    tokens = rng.random() < 0.9
    judge_value = rng.uniform(0.6, 1.0) if passed else rng.uniform(0.0, 0.4)
    judge = ScoreRecord(
        scorer="judge",
        value=round(judge_value, 3),
        passed=judge_value >= 0.5,
        reason=""
        if passed
        else f"The answer {answer} is wrong: it should be {item.expected}.",
    )
    if rng.random() < 0.005:
        judge = ScoreRecord(
            scorer="judge",
            value=None,
            passed=None,
            error=f"judge call failed: HTTP 503 (request id req_{_hex(rng, 24)})",
        )
    prompt, completion = rng.randint(40, 400), rng.randint(5, 300)
    return ResultRecord(
        item_id=item.pk,
        item_index=item.index,
        epoch=0,
        status="succeeded",
        output=output,
        attempts=[{"number": 1, "outcome": "ok", "latency_ms": 0.0}],
        started_at=started,
        finished_at=when,
        latency_ms=round(rng.lognormvariate(6.5, 0.5), 1),
        prompt_tokens=prompt if tokens else None,
        completion_tokens=completion if tokens else None,
        cost=(prompt * 0.15 + completion * 0.6) / 1e6 if tokens else None,
        scores=[
            ScoreRecord(
                scorer="exact_match",
                value=float(passed),
                passed=passed,
                reason="" if passed else f"expected {item.expected!r}",
            ),
            judge,
        ],
    )


def seed_run(
    *,
    user: Any,
    dataset: Any,
    profile: Profile,
    name: str,
    figures_cpu: list[float] | None = None,
) -> Any:
    """A finished run of every item of ``dataset``, stored in bulk batches."""
    from django.utils import timezone

    from runs.analysis.figures import run_figures_store
    from runs.executor.store import results_write, run_finish
    from runs.models import Item, Run, RunStatus

    run = imported("run_create")(
        user=user,
        dataset=dataset,
        target_kind="demo",
        target_config={"min_latency_ms": 0, "max_latency_ms": 0},
        scorers=[
            {"kind": "exact_match"},
            {"kind": "includes", "name": "judge"},
        ],
        name=name,
        launch=False,
    )
    rng = random.Random(profile.seed)
    start = timezone.now() - timedelta(hours=2)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=start)
    items = Item.objects.filter(dataset=dataset).order_by("index")
    batch = []
    for item in items.only("pk", "index", "expected").iterator(chunk_size=BATCH):
        when = start + timedelta(milliseconds=36 * item.index)
        batch.append(result_record(item, rng, profile, when))
        if len(batch) == BATCH:
            results_write(run.pk, batch)
            batch = []
    if batch:
        results_write(run.pk, batch)
    run_finish(run.pk, cancelled=False)
    # What the executor does when a run ends: its figures are stored with it.
    began, cpu_began = time.perf_counter(), time.process_time()
    run_figures_store(run.pk)
    FIGURES_SECONDS.append(time.perf_counter() - began)
    if figures_cpu is not None:
        figures_cpu.append(time.process_time() - cpu_began)
    run.refresh_from_db()
    return run


@dataclass
class Seeded:
    user: Any
    dataset: Any
    baseline: Any
    candidate: Any


def seed_analysis(
    *, items: int, seed: int = 0, figures_cpu: list[float] | None = None
) -> Seeded:
    """A user, a project, a dataset of ``items`` and two finished runs of it."""
    from django.contrib.auth.models import User

    user = User.objects.create_user(USERNAME, "bench@example.org", None)
    project = imported("project_create")(name="Analysis benchmark", owner=user)
    dataset = imported("dataset_create_from_items")(
        project=project, user=user, name="sums", items=bench_items(items, seed=seed)
    )
    baseline = seed_run(
        user=user,
        dataset=dataset,
        profile=BASELINE,
        name="baseline",
        figures_cpu=figures_cpu,
    )
    candidate = seed_run(
        user=user,
        dataset=dataset,
        profile=CANDIDATE,
        name="candidate",
        figures_cpu=figures_cpu,
    )
    return Seeded(user, dataset, baseline, candidate)


# -- measuring -------------------------------------------------------------------------


@dataclass
class Timing:
    label: str
    url: str
    goal: float | None
    status: int | None = None
    best: float | None = None
    # This process's CPU seconds of the request with the least: with SQLite,
    # the database's work is in it; it moves less with the machine's load.
    cpu: float | None = None
    size: int = 0

    @property
    def verdict(self) -> str:
        if self.status is None:
            return "missing"
        if self.status != 200:
            return f"HTTP {self.status}"
        if self.goal is None:
            return ""
        return "ok" if self.best <= self.goal else "over goal"


def _drain(response: Any) -> int:
    if response.streaming:
        return sum(len(part) for part in response.streaming_content)
    return len(response.content)


def measure(client: Any, label: str, url: str, goal: float | None, repeat: int):
    """Best server time of ``repeat`` GETs of ``url``, caches cleared before each."""
    from django.core.cache import caches
    from django.urls import Resolver404, resolve

    timing = Timing(label, url, goal)
    try:
        resolve(url.partition("?")[0])
    except Resolver404:
        return timing
    for _ in range(repeat):
        for cache in caches.all():
            cache.clear()
        begin, cpu_begin = time.perf_counter(), time.process_time()
        response = client.get(url)
        timing.size = _drain(response)
        elapsed = time.perf_counter() - begin
        cpu = time.process_time() - cpu_begin
        timing.status = response.status_code
        timing.best = elapsed if timing.best is None else min(timing.best, elapsed)
        timing.cpu = cpu if timing.cpu is None else min(timing.cpu, cpu)
        if response.status_code != 200:
            break
    return timing


def export_peak_memory(client: Any, url: str) -> float:
    """Peak memory allocated by Python while one export streams, in MiB."""
    tracemalloc.start()
    try:
        _drain(client.get(url))
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def report(label: str, seeded: Seeded, timings: list[Timing]) -> None:
    print(
        f"\n{label}: runs {seeded.baseline.pk} and {seeded.candidate.pk}, "
        f"{seeded.baseline.total:,} items each"
    )
    print(
        f"{'what':36} {'best s':>8} {'cpu s':>7} {'goal s':>7}  {'result':10} "
        f"{'bytes':>12}  url"
    )
    for t in timings:
        best = f"{t.best:8.3f}" if t.best is not None else f"{'-':>8}"
        cpu = f"{t.cpu:7.3f}" if t.cpu is not None else f"{'-':>7}"
        goal = f"{t.goal:7.1f}" if t.goal is not None else f"{'-':>7}"
        size = f"{t.size:12,}" if t.status else f"{'':12}"
        print(f"{t.label:36} {best} {cpu} {goal}  {t.verdict:10} {size}  {t.url}")


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    django.setup()
    call_command("migrate", verbosity=0)
    begin = time.perf_counter()
    figures_cpu: list[float] = []
    seeded = seed_analysis(items=args.items, figures_cpu=figures_cpu)
    if connection.vendor == "postgresql":
        # What autovacuum does soon after a run this size is stored.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(f"seeded {2 * args.items:,} results in {time.perf_counter() - begin:.0f} s")
    print(
        "figures computed and stored when each run ended: "
        + ", ".join(f"{seconds:.3f} s" for seconds in FIGURES_SECONDS)
    )
    client = Client()
    client.force_login(seeded.user)
    ids = {"a": seeded.baseline.pk, "b": seeded.candidate.pk}
    timings = [
        measure(client, label, url.format(**ids), goal, args.repeat)
        for label, url, goal in URLS
    ]
    report(args.label, seeded, timings)
    if args.json_out:
        import runs

        figures = {
            "code": str(Path(runs.__file__).resolve().parent.parent),
            "database": args.label,
            "items": args.items,
            "figures_seconds": FIGURES_SECONDS,
            "figures_cpu_seconds": figures_cpu,
            "load_average": round(os.getloadavg()[0], 2),
            "timings": [
                {
                    "label": t.label,
                    "status": t.status,
                    "wall_s": t.best,
                    "cpu_s": t.cpu,
                    "bytes": t.size,
                }
                for t in timings
            ],
        }
        Path(args.json_out).write_text(json.dumps(figures, indent=2))
    if args.memory:
        url = URLS[-2][1].format(**ids)
        print(
            f"\npeak Python memory while the CSV export streams: "
            f"{export_peak_memory(client, url):.1f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--memory", action="store_true", help="also trace the export's peak memory"
    )
    parser.add_argument("--json-out", help="also write the figures here as JSON")
    parser.add_argument(
        "--source",
        help="measure another checkout's code (an export of an older commit)",
    )
    run_in_scratch(run, parser.parse_args())


def run_in_scratch(
    bench: Callable[[argparse.Namespace], None], args: argparse.Namespace
) -> None:
    """``bench(args)`` against a scratch database, dropped after (unless
    ``args.keep``); ``args.label`` names the database."""
    scratch = scratch_database(keep=args.keep)
    args.label = scratch.label
    os.environ.update(scratch.env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    if getattr(args, "source", None):
        # Another checkout's code (an export of an older commit) measured by
        # this script: before and after, alike.
        sys.path.insert(0, str(Path(args.source).resolve()))
    try:
        bench(args)
    finally:
        from django.db import connections

        connections.close_all()
        scratch.drop()


if __name__ == "__main__":
    main()

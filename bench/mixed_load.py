"""Pages and the API under a mixed load while a large run executes.

The script serves one or more project directories (``--source``, default this
checkout) with Daphne, as ``make run`` does, in either mode (``--mode``):

- ``embedded``: a fresh SQLite data directory; the run executes in the
  server's own process, on its event loop;
- ``distributed``: a scratch PostgreSQL database on ``DATABASE_URL``'s server
  (dropped at the end), ``REDIS_URL`` for sessions and live progress,
  ``EVALSITE_EXECUTOR=procrastinate`` and ``--workers`` ``evalworker``
  processes (``--shards 2`` each, as ``make distributed`` starts them); with
  ``--web-processes N`` the site is served by ``manage.py serve --processes
  N`` (N Daphne processes on one socket) instead of one Daphne, and the
  server's CPU is that of them all.

It seeds the site as ``http_bench.py`` does (a user, a bearer key, a run of
300 results, 24 small runs) and adds a dataset of ``--items`` items and an
``openai_chat`` target at the fake model server (``runs.testing.fake_openai``
in its own process, answering after ``--latency-ms``). Then, per repetition:

1. **alone**: a run of the large dataset at ``--concurrency`` is started
   through the API and timed (the run's own ``wall_seconds``); its physical
   limit is ``concurrency / latency`` items a second, its efficiency the rate
   over that limit;
2. **loaded**: the same run again, and as soon as it has stored its first
   result, ``--clients`` keep-alive connections (spread evenly over the ten
   kinds below) send GETs back to back for ``--seconds``.

Kinds (the running run unless said): ``run`` (its page), ``runs`` (the list),
``results_filtered`` (its page with a scorer's failures), ``result`` (one of
its results), ``api_summary``, ``api_results``, ``clusters``, ``compare``
(the page: the "alone" run against it), ``projects``, ``live`` (the figures
the run page fetches while the run goes).

Per kind and overall: requests a second, p50/p95/p99, errors (non-2xx answers,
failed connections and answers slower than 30 s), the same percentiles for
the requests started before the run ended; the CPU seconds of the server, the
workers, the fake server and this client over the window (distributed, also
of the database's processes serving the site); the load average;
the run's efficiency alone and under load. The client is a small asyncio
HTTP/1.1 client in this process (about 0.1 ms of CPU a request, printed).

    .venv/bin/python bench/mixed_load.py                        # embedded, 60 s
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
    REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/mixed_load.py --mode distributed
    .venv/bin/python bench/mixed_load.py --source /tmp/before --source . --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from http_bench import (
    cpu_ticks,
    daphne,
    free_port,
    login,
    note,
    percentile,
    prepare,
    server_env,
)

ROOT = Path(__file__).resolve().parent.parent
# A sitecustomize that counts the server's computations (its docstring).
COMPUTATIONS = Path(__file__).resolve().parent / "computations"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
REQUEST_TIMEOUT = 30.0
GOAL_P95_MS = 300.0
KINDS: dict[str, tuple[str, str]] = {
    "run": ("/runs/{run}/", "session"),
    "runs": ("/", "session"),
    "results_filtered": ("/runs/{run}/?scorer=exact_match&verdict=failed", "session"),
    "result": ("/runs/{run}/results/{result}/", "session"),
    "api_summary": ("/api/v1/runs/{run}/summary", "bearer"),
    "api_results": ("/api/v1/runs/{run}/results", "bearer"),
    "clusters": ("/runs/{run}/clusters/", "session"),
    "compare": ("/compare/?baseline={baseline}&candidates={run}", "session"),
    "projects": ("/projects/", "session"),
    "live": ("/runs/{run}/live-figures/", "session"),
}


# -- seeding (a child process, with the source's code) ------------------------------


def seed_main(items: int, base_url: str) -> None:
    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User

    from runs.datasets import importers
    from runs.models import Project
    from runs.targets.services import target_create

    user = User.objects.get(username="bench")
    project = Project.objects.get(name="Benchmark")
    rows = [
        {"id": f"m{n:06d}", "input": f"What is {n % 97} + {n % 89}?",
         "expected": str(n % 97 + n % 89)}
        for n in range(items)
    ]  # fmt: skip
    dataset = importers.dataset_create_from_items(
        project=project, user=user, name="mixed load", items=rows
    )
    target = target_create(
        project=project,
        user=user,
        name="Fake model",
        kind="openai_chat",
        config={"base_url": base_url, "model": "fake"},
    )
    print(json.dumps({"dataset": dataset.pk, "target": target.pk}))


# -- the load ------------------------------------------------------------------------


@dataclass
class Sample:
    kind: str
    start: float  # time.time() when sent
    seconds: float
    status: int | str  # an HTTP status, or the error's name


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one HTTP/1.1 answer; (status, whether the server keeps the line)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    else:
        await reader.read()
        return status, False
    return status, headers.get("connection", "").lower() != "close"


async def one_client(
    port: int, kind: str, path: str, header: str, stop: float, out: list[Sample]
) -> None:
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{header}\r\n\r\n"
    ).encode()
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    while time.time() < stop:
        began, clock = time.time(), time.perf_counter()
        try:
            if connection is None:
                connection = await asyncio.open_connection("127.0.0.1", port)
            reader, writer = connection
            writer.write(request)
            status, keep = await asyncio.wait_for(read_answer(reader), REQUEST_TIMEOUT)
            outcome: int | str = status
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            outcome, keep = type(exc).__name__, False
        out.append(Sample(kind, began, time.perf_counter() - clock, outcome))
        if not keep and connection is not None:
            connection[1].close()
            connection = None
    if connection is not None:
        connection[1].close()


def load(
    port: int, paths: dict[str, tuple[str, str]], clients: int, seconds: float
) -> list[Sample]:
    """``clients`` connections spread evenly over the kinds, for ``seconds``."""
    out: list[Sample] = []
    kinds = list(paths)
    stop = time.time() + seconds

    async def all_clients() -> None:
        async with asyncio.TaskGroup() as tasks:
            for n in range(clients):
                kind = kinds[n % len(kinds)]
                path, header = paths[kind]
                tasks.create_task(one_client(port, kind, path, header, stop, out))

    asyncio.run(all_clients())
    return out


# -- the site -------------------------------------------------------------------------


@dataclass
class Site:
    base: str
    port: int
    pids: dict[str, list[int]]  # "server", "workers", "fake"
    seeded: dict
    session: str
    workers: list[subprocess.Popen] = field(default_factory=list)
    poll_errors: int = 0
    log: Path | None = None
    computations_dir: Path | None = None
    database: str | None = None  # distributed: the scratch database's name

    def computations(self) -> dict[str, int]:
        """Values the server's caches stored so far, by key kind."""
        assert self.computations_dir is not None
        counts: dict[str, int] = {}
        for pid in self.pids["server"]:
            with contextlib.suppress(OSError, ValueError):
                text = (self.computations_dir / f"{pid}.json").read_text()
                for kind, count in json.loads(text).items():
                    counts[kind] = counts.get(kind, 0) + count
        return counts

    def served(self) -> int:
        """GETs in the server's access log so far."""
        assert self.log is not None
        return self.log.read_bytes().count(b'"GET ')

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        import httpx

        answer = httpx.request(
            method,
            self.base + path,
            json=body,
            headers={"Authorization": f"Bearer {self.seeded['api_key']}"},
            timeout=60,
        )
        answer.raise_for_status()
        return answer.json()

    def cpu(self) -> dict[str, float]:
        return {
            role: sum(cpu_ticks(pid) for pid in pids) / CLOCK_TICKS
            for role, pids in self.pids.items()
        }

    def server_cpu_each(self) -> list[float]:
        return [cpu_ticks(pid) / CLOCK_TICKS for pid in self.pids["server"]]

    def database_cpu(self) -> float:
        """CPU seconds so far of the PostgreSQL processes serving the site's
        database (the server's and the workers' sessions, which it keeps open:
        one that ended in between is not counted)."""
        if self.database is None:
            return 0.0
        ticks = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                title = (entry / "cmdline").read_bytes().decode(errors="replace")
                if title.startswith("postgres: ") and f" {self.database} " in title:
                    ticks += cpu_ticks(int(entry.name))
        return ticks / CLOCK_TICKS


def start_run(site: Site, concurrency: int, name: str) -> int:
    run = site.api(
        "POST",
        "/api/v1/runs",
        {
            "dataset": site.seeded["dataset"],
            "target": site.seeded["target"],
            "scorers": ["exact_match"],
            "options": {"concurrency": concurrency},
            "name": name,
        },
    )
    return run["id"]


def wait_run(site: Site, run_id: int, *, until_results: int = 0) -> dict:
    """Poll the run (twice a second) until it ends, or has ``until_results``."""
    import httpx

    while True:
        try:
            run = site.api("GET", f"/api/v1/runs/{run_id}")
        except httpx.HTTPStatusError as exc:  # counted with the load's errors
            note(f"polling the run: {exc.response.status_code}")
            site.poll_errors += 1
            time.sleep(0.5)
            continue
        if run["status"] not in ("pending", "running"):
            return run
        if until_results and run["counts"]["processed"] >= until_results:
            return run
        time.sleep(0.5)


@dataclass
class Phase:
    mode: str
    source: str
    repetition: int
    run_id: int
    items: int
    wall_seconds: float
    efficiency: float
    load_before: float
    load_after: float
    cpu: dict[str, float]
    samples: list[Sample] = field(default_factory=list)
    client_cpu: float = 0.0
    # GETs the server answered in the window (its access log), including those
    # whose client had given up waiting; and its CPU seconds in the window.
    served: int = 0
    window_server_cpu: float = 0.0
    # The same by server process (the Daphne processes, then ``serve``).
    window_server_cpu_each: list[float] = field(default_factory=list)
    window_database_cpu: float = 0.0
    # Values the server computed and cached in the window, by key kind.
    computed: dict[str, int] = field(default_factory=dict)
    run_finished: float = 0.0  # time.time() of the run's end


def run_phase(site: Site, args: argparse.Namespace, *, loaded: bool, **meta) -> Phase:
    load_before = os.getloadavg()[0]
    cpu_before = site.cpu()
    run_id = start_run(site, args.concurrency, "loaded" if loaded else "alone")
    samples: list[Sample] = []
    client_cpu = window_cpu = window_database = 0.0
    window_each: list[float] = []
    served = 0
    computed: dict[str, int] = {}
    if loaded:
        wait_run(site, run_id, until_results=1)
        first = site.api("GET", f"/api/v1/runs/{run_id}/results?page_size=1")
        paths = kind_paths(site, run_id, first["items"][0]["id"], meta["baseline"])
        clock = time.process_time()
        served_before, window_cpu = site.served(), site.cpu()["server"]
        each_before = site.server_cpu_each()
        database_before = site.database_cpu()
        computed_before = site.computations()
        with profiling(args.profile, site, meta):
            samples = load(site.port, paths, args.clients, args.seconds)
        client_cpu = time.process_time() - clock
        served = site.served() - served_before
        window_cpu = site.cpu()["server"] - window_cpu
        window_each = [
            b - a for a, b in zip(each_before, site.server_cpu_each(), strict=True)
        ]
        window_database = site.database_cpu() - database_before
        computed = {
            kind: count - computed_before.get(kind, 0)
            for kind, count in sorted(site.computations().items())
        }
    run = wait_run(site, run_id)
    cpu_after = site.cpu()
    limit = args.concurrency / (args.latency_ms / 1000)
    wall = float(run["wall_seconds"])
    done = run["counts"]["succeeded"]
    from datetime import datetime

    return Phase(
        mode=meta["mode"],
        source=meta["source"],
        repetition=meta["repetition"],
        run_id=run_id,
        items=done,
        wall_seconds=wall,
        efficiency=done / wall / limit,
        load_before=load_before,
        load_after=os.getloadavg()[0],
        cpu={k: cpu_after[k] - cpu_before[k] for k in cpu_after},
        samples=samples,
        client_cpu=client_cpu,
        served=served,
        window_server_cpu=window_cpu,
        window_server_cpu_each=window_each,
        window_database_cpu=window_database,
        computed=computed,
        run_finished=datetime.fromisoformat(run["finished_at"]).timestamp(),
    )


@contextlib.contextmanager
def profiling(out_dir: Path | None, site: Site, meta: dict) -> Iterator[None]:
    """py-spy (``--profile DIR``) on the server while the load runs: samples of
    the thread holding the GIL, as collapsed stacks (``--format raw``)."""
    if out_dir is None:
        yield
        return
    binary = shutil.which("py-spy")
    if binary is None:
        raise SystemExit("--profile: py-spy is not on PATH")
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{meta['mode']}-{Path(meta['source']).name}-{meta['repetition']}.txt"
    spy = subprocess.Popen(
        [binary, "record", "--pid", str(site.pids["server"][0]), "--gil",
         "--nonblocking", "--format", "raw", "--rate", "50", "-o",
         str(out_dir / name)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def kind_paths(site: Site, run_id: int, result_id: int, baseline: int) -> dict:
    values = {"run": run_id, "result": result_id, "baseline": baseline}
    headers = {
        "session": f"Cookie: sessionid={site.session}",
        "bearer": f"Authorization: Bearer {site.seeded['api_key']}",
    }
    return {
        kind: (path.format(**values), headers[credentials])
        for kind, (path, credentials) in KINDS.items()
    }


@contextlib.contextmanager
def serving(
    mode: str, source: Path, args: argparse.Namespace, workdir: Path
) -> Iterator[Site]:
    python = sys.executable
    fake_port = free_port()
    fake = subprocess.Popen(
        [python, "-m", "runs.testing.fake_openai", "--port", str(fake_port),
         "--latency-ms", str(args.latency_ms)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    scratch = None
    workers: list[subprocess.Popen] = []
    data_dir = workdir / f"{mode}-{source.name}-{time.monotonic_ns()}"
    extra = {"EVALSITE_TARGET_ALLOW": "loopback,public"} | dict(args.env)
    try:
        if mode == "distributed":
            from distributed import Scratch

            scratch = Scratch(os.environ["DATABASE_URL"])
            extra |= {
                "DATABASE_URL": scratch.url,
                "REDIS_URL": os.environ["REDIS_URL"],
                "EVALSITE_EXECUTOR": "procrastinate",
            }
        env = server_env(source, data_dir, extra)
        env["PYTHONPATH"] += os.pathsep + str(COMPUTATIONS)
        env["EVALSITE_BENCH_COMPUTATIONS"] = str(data_dir)
        note(f"{mode}: migrating and seeding with the code of {source}")
        seeded = prepare(python, source, data_dir, env)
        out = subprocess.run(
            [python, str(Path(__file__).resolve()), "--seed-items", str(args.items),
             "--seed-base-url", f"http://127.0.0.1:{fake_port}/v1"],
            cwd=source, env=env, check=True, stdout=subprocess.PIPE, text=True,
        ).stdout  # fmt: skip
        seeded |= json.loads(out.strip().splitlines()[-1])
        for n in range(args.workers if mode == "distributed" else 0):
            with (data_dir / f"worker-{n}.log").open("wb") as log:
                workers.append(
                    subprocess.Popen(
                        [python, "manage.py", "evalworker", "--shards", "2"],
                        cwd=source,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        web = args.web_processes if mode == "distributed" else None
        server_log = data_dir / "daphne.log"
        with daphne(python, source, env, server_log, processes=web) as (proc, base):
            # The first request loads what the server loads lazily: on a
            # busy machine it may take longer than the login's own timeout.
            import httpx

            httpx.get(base + "/login/", timeout=300).raise_for_status()
            session = login(base, seeded["username"], seeded["password"])
            yield Site(
                base=base,
                port=int(base.rsplit(":", 1)[1]),
                pids={
                    # serve's Daphne processes: all started once one answered.
                    "server": [*children(proc.pid), proc.pid] if web else [proc.pid],
                    "workers": [w.pid for w in workers],
                    "fake": [fake.pid],
                },
                seeded=seeded,
                session=session,
                workers=workers,
                log=server_log,
                computations_dir=data_dir,
                database=scratch.name if scratch is not None else None,
            )
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(60)
            except subprocess.TimeoutExpired:
                worker.kill()
        fake.send_signal(signal.SIGTERM)
        fake.wait(10)
        if scratch is not None:
            scratch.drop()


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


# -- report ---------------------------------------------------------------------------


def failed(sample: Sample) -> bool:
    return not isinstance(sample.status, int) or sample.status >= 400


def describe(samples: list[Sample], seconds: float) -> str:
    ms = [s.seconds * 1000 for s in samples]
    errors = sum(map(failed, samples))
    return (
        f"{len(samples) / seconds:7.1f} {percentile(ms, 50):7.0f} "
        f"{percentile(ms, 95):7.0f} {percentile(ms, 99):7.0f} {errors:6d}"
    )


def report_phase(phase: Phase, args: argparse.Namespace) -> None:
    cpu = " ".join(f"{k} {v:.1f} s" for k, v in phase.cpu.items() if v)
    print(
        f"\n{phase.mode} {phase.source} #{phase.repetition} "
        f"{'loaded' if phase.samples else 'alone'}: run {phase.items} items in "
        f"{phase.wall_seconds:.1f} s, efficiency {phase.efficiency:.3f}; "
        f"CPU {cpu}; load {phase.load_before:.1f} -> {phase.load_after:.1f}"
    )
    if not phase.samples:
        return
    during = [s for s in phase.samples if s.start < phase.run_finished]
    span = min(args.seconds, max(phase.run_finished - phase.samples[0].start, 1e-3))
    print(
        f"{'kind':<17} {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'errors':>6}"
        f"   while the run went: {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7}"
    )
    for kind in [*KINDS, "overall"]:
        rows = [s for s in phase.samples if kind in ("overall", s.kind)]
        going = [s for s in during if kind in ("overall", s.kind)]
        print(
            f"{kind:<17} {describe(rows, args.seconds)}   {'':>19}"
            f"{describe(going, span)[:31]}"
        )
    total = len(phase.samples)
    statuses: dict[str, int] = {}
    for sample in phase.samples:
        statuses[str(sample.status)] = statuses.get(str(sample.status), 0) + 1
    print(
        f"statuses {statuses}; the server answered {phase.served} GETs in the "
        f"window, with {phase.window_server_cpu:.1f} s of CPU "
        f"({1000 * phase.window_server_cpu / max(phase.served, 1):.2f} ms a GET, "
        f"the run's share included if embedded); client CPU "
        f"{1000 * phase.client_cpu / total:.3f} ms a request"
    )
    if phase.window_database_cpu:
        print(
            f"the database's processes over the window: "
            f"{phase.window_database_cpu:.1f} s of CPU "
            f"({1000 * phase.window_database_cpu / max(phase.served, 1):.2f} ms "
            "a GET, the workers' writes included)"
        )
    if len(phase.window_server_cpu_each) > 1:
        each = ", ".join(f"{cpu:.1f}" for cpu in phase.window_server_cpu_each)
        print(f"server CPU by process (the Daphne processes, then serve): {each} s")
    computed = ", ".join(
        f"{kind} {count / args.seconds:.1f}"
        for kind, count in phase.computed.items()
        if count
    )
    print(f"computed and cached a second, by kind: {computed or 'none'}")


def summary(phases: list[Phase], seconds: float) -> None:
    print("\nmode         source        load  eff alone  eff loaded  p50  p95  p99  "
          "p95 (run going)  req/s  errors")  # fmt: skip
    for phase in phases:
        if not phase.samples:
            continue
        alone = [
            p.efficiency
            for p in phases
            if not p.samples and (p.mode, p.source) == (phase.mode, phase.source)
        ]
        ms = [s.seconds * 1000 for s in phase.samples]
        going = [
            s.seconds * 1000 for s in phase.samples if s.start < phase.run_finished
        ]
        print(
            f"{phase.mode:<12} {Path(phase.source).name[-12:]:<12} "
            f"{phase.load_before:5.1f} {statistics.median(alone):10.3f} "
            f"{phase.efficiency:11.3f} {percentile(ms, 50):4.0f} "
            f"{percentile(ms, 95):4.0f} {percentile(ms, 99):4.0f} "
            f"{percentile(going, 95):16.0f} "
            f"{len(ms) / seconds:6.0f} "
            f"{sum(map(failed, phase.samples)):7d}"
        )


def write_json(path: Path, phases: list[Phase]) -> None:
    path.write_text(json.dumps([asdict(phase) for phase in phases]) + "\n")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["embedded", "distributed", "both"],
                        default="embedded")  # fmt: skip
    parser.add_argument("--source", action="append", type=Path)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--web-processes",
        type=int,
        metavar="N",
        help="distributed: serve with manage.py serve --processes N",
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="py-spy the server while loaded: its stacks into DIR",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        type=lambda item: item.split("=", 1),
        metavar="NAME=VALUE",
        help="extra server environment (repeatable)",
    )
    parser.add_argument("--seed-items", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed-base-url", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.seed_items:
        seed_main(args.seed_items, args.seed_base_url)
        return 0
    modes = ["embedded", "distributed"] if args.mode == "both" else [args.mode]
    if "distributed" in modes and not (
        os.environ.get("DATABASE_URL", "").startswith("postgres")
        and os.environ.get("REDIS_URL")
    ):
        raise SystemExit("distributed: DATABASE_URL (PostgreSQL) and REDIS_URL needed")
    if args.web_processes is not None and args.mode != "distributed":
        raise SystemExit("--web-processes: only with --mode distributed")
    sources = [path.resolve() for path in (args.source or [ROOT])]
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-mixed-load-"))
    phases: list[Phase] = []
    try:
        for repetition in range(1, args.repeat + 1):
            for mode in modes:
                for source in sources:
                    meta = {"mode": mode, "source": str(source)}
                    meta["repetition"] = repetition
                    with serving(mode, source, args, workdir) as site:
                        alone = run_phase(site, args, loaded=False, **meta)
                        report_phase(alone, args)
                        loaded = run_phase(
                            site, args, loaded=True, baseline=alone.run_id, **meta
                        )
                        report_phase(loaded, args)
                    phases += [alone, loaded]
                    if args.json_out:
                        write_json(args.json_out, phases)
    finally:
        if args.keep:
            note(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summary(phases, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""HTTP benchmark: Daphne serving the dashboard and the API in the embedded mode.

For each project directory given (``--source``, default: this checkout) the
script migrates a fresh SQLite database in a temporary EVALSITE_DATA_DIR,
seeds it (``http_seed.py``: a user, a bearer key, a run of a few hundred
results and a few small runs), starts ``daphne evalsite.asgi:application`` as
``make run`` does, logs in over HTTP, and sends N GETs at concurrency C to each
page with ``hey`` (a small Go load generator from Debian, installed with
apt-get when missing). Several sources and ``--repeat`` alternate, so that a
"before" and an "after" tree are measured back to back on the same machine.

    .venv/bin/python bench/http_bench.py
    .venv/bin/python bench/http_bench.py --repeat 3 --source /tmp/before --source .

Per page and source: requests a second, latency p50/p95/p99, errors (non-2xx
answers and failed connections) and the server's CPU time per request, which
other load on the machine disturbs far less than the rate.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
GOAL_RPS = 300.0
GOAL_P95_MS = 300.0
WARMUP_REQUESTS = 100
# name -> (path, credentials): "session" (logged-in cookie), "bearer" or None.
PAGES: dict[str, tuple[str, str | None]] = {
    "login": ("/login/", None),
    "runs": ("/", "session"),
    "api_runs": ("/api/v1/runs", "bearer"),
    "results": ("/runs/{run_id}/", "session"),
    "api_results": ("/api/v1/runs/{run_id}/results", "bearer"),
}
DEFAULT_PAGES = ["login", "runs", "api_runs", "results"]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def note(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@dataclass
class Measure:
    source: str
    page: str
    repetition: int
    requests: int
    concurrency: int
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    errors: int
    statuses: dict[str, int]
    server_cpu_ms_per_request: float
    client_cpu_ms_per_request: float


# -- processes ------------------------------------------------------------------


def hey_binary() -> str:
    found = shutil.which("hey")
    if found:
        return found
    note("hey is missing: installing Debian's package with apt-get")
    apt = ["apt-get", "install", "-y", "-q", "hey"]
    if os.geteuid() != 0:
        apt = ["sudo", *apt]
    subprocess.run(
        apt, check=True, env=os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    )
    found = shutil.which("hey")
    if not found:
        raise SystemExit("hey is not installed and apt-get could not install it")
    return found


def server_env(source: Path, data_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    drop = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "EVALSITE_DEBUG"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["EVALSITE_DATA_DIR"] = str(data_dir)
    # The source's own packages first, whatever the environment has installed.
    env["PYTHONPATH"] = str(source)
    return env | extra


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed_script(source: Path) -> Path:
    """The seed written for the code measured (its imports follow its layout)."""
    own = source / "bench" / "http_seed.py"
    return own if own.is_file() else HERE / "http_seed.py"


def prepare(python: str, source: Path, data_dir: Path, env: dict[str, str]) -> dict:
    subprocess.run(
        [python, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=source,
        env=env,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    out = subprocess.run(
        [python, str(seed_script(source))],
        cwd=source,
        env=env,
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    seeded = json.loads(out.strip().splitlines()[-1])
    if Path(seeded["code"]).resolve() != (source / "runs").resolve():
        raise SystemExit(
            f"seeded with {seeded['code']}, not {source}: check PYTHONPATH"
        )
    return seeded


@contextlib.contextmanager
def daphne(
    python: str,
    source: Path,
    env: dict[str, str],
    log: Path,
    *,
    processes: int | None = None,
) -> Iterator[tuple[subprocess.Popen, str]]:
    """Daphne on a free port, or with ``processes`` the source's
    ``manage.py serve --processes N`` (N Daphne processes on one socket)."""
    port = free_port()
    argv = [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    argv += ["evalsite.asgi:application"]
    if processes is not None:
        argv = [python, "manage.py", "serve", "--port", str(port)]
        argv += ["--processes", str(processes)]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=source,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"daphne exited with {proc.returncode}; see {log}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=0.5),
            ):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"daphne did not listen within 60 s; see {log}")
            time.sleep(0.1)
        yield proc, base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def login(base: str, username: str, password: str) -> str:
    """Log in through the login form, as a browser does; return the session id."""
    import httpx

    with httpx.Client(base_url=base, timeout=30) as client:
        page = client.get("/login/")
        page.raise_for_status()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if token is None:
            raise SystemExit("no CSRF token on the login page")
        answer = client.post(
            "/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": token.group(1),
            },
        )
        session = client.cookies.get("sessionid")
        if answer.status_code != 302 or not session:
            raise SystemExit(f"login failed: {answer.status_code}")
        return session


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def hey(
    binary: str, url: str, headers: list[str], requests: int, concurrency: int
) -> list[tuple[float, float, int]]:
    """One row per answered request: (start offset s, response time s, status)."""
    argv = [binary, "-n", str(requests), "-c", str(concurrency), "-o", "csv"]
    argv += ["-cpus", "1", "-disable-compression", "-disable-redirects"]
    for header in headers:
        argv += ["-H", header]
    done = subprocess.run([*argv, url], capture_output=True, check=False)
    if done.returncode:
        raise SystemExit(f"hey failed ({done.returncode}): {done.stderr[-500:]!r}")
    return [
        (float(row["offset"]), float(row["response-time"]), int(row["status-code"]))
        for row in csv.DictReader(io.StringIO(done.stdout.decode()))
    ]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


# -- measuring --------------------------------------------------------------------


def measure_page(
    *,
    binary: str,
    base: str,
    server_pid: int,
    source: str,
    page: str,
    path: str,
    headers: list[str],
    requests: int,
    concurrency: int,
    repetition: int,
) -> Measure:
    url = base + path
    hey(binary, url, headers, WARMUP_REQUESTS, min(concurrency, 10))
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ticks_before = cpu_ticks(server_pid)
    rows = hey(binary, url, headers, requests, concurrency)
    server_cpu = (cpu_ticks(server_pid) - ticks_before) / CLOCK_TICKS
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = (children_after.ru_utime + children_after.ru_stime) - (
        children_before.ru_utime + children_before.ru_stime
    )
    latencies = [seconds * 1000 for _, seconds, _ in rows]
    wall = max((offset + seconds for offset, seconds, _ in rows), default=float("nan"))
    statuses: dict[str, int] = {}
    for _, _, status in rows:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    failed_connections = requests - len(rows)
    if failed_connections:
        statuses["no answer"] = failed_connections
    errors = failed_connections + sum(1 for *_, status in rows if status != 200)
    return Measure(
        source=source,
        page=page,
        repetition=repetition,
        requests=requests,
        concurrency=concurrency,
        rps=len(rows) / wall if rows else 0.0,
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        p99_ms=percentile(latencies, 99),
        max_ms=max(latencies, default=float("nan")),
        errors=errors,
        statuses=statuses,
        server_cpu_ms_per_request=1000 * server_cpu / requests,
        client_cpu_ms_per_request=1000 * client_cpu / requests,
    )


def headers_for(credentials: str | None, session: str, api_key: str) -> list[str]:
    if credentials == "session":
        return [f"Cookie: sessionid={session}"]
    if credentials == "bearer":
        return [f"Authorization: Bearer {api_key}"]
    return []


# -- report -----------------------------------------------------------------------


def spread(values: list[float]) -> str:
    return f"{min(values):7.1f} {statistics.median(values):7.1f} {max(values):7.1f}"


def report(measures: list[Measure], sources: list[str], pages: list[str]) -> bool:
    """Print min / median / max per source and page; True when every goal is met."""
    met = True
    print(
        f"\n{'source':<24} {'page':<12} {'req/s min  med   max':>23} "
        f"{'p50 ms (med)':>12} {'p95 ms min  med   max':>23} {'p99 ms (med)':>12} "
        f"{'errors':>6} {'server CPU ms/req (med)':>23}"
    )
    for source in sources:
        for page in pages:
            rows = [m for m in measures if m.source == source and m.page == page]
            if not rows:
                continue
            rps = [m.rps for m in rows]
            p95 = [m.p95_ms for m in rows]
            errors = sum(m.errors for m in rows)
            goal = min(rps) >= GOAL_RPS and max(p95) < GOAL_P95_MS and errors == 0
            met = met and goal
            print(
                f"{source[-24:]:<24} {page:<12} {spread(rps):>23} "
                f"{statistics.median(m.p50_ms for m in rows):12.1f} "
                f"{spread(p95):>23} {statistics.median(m.p99_ms for m in rows):12.1f} "
                f"{errors:6d} "
                f"{statistics.median(m.server_cpu_ms_per_request for m in rows):23.2f}"
                + ("" if goal else "  below goal")
            )
    client = [m.client_cpu_ms_per_request for m in measures]
    print(
        f"\nGoal per page: >= {GOAL_RPS:.0f} req/s, p95 < {GOAL_P95_MS:.0f} ms, "
        f"no error. The client (hey, one core at most) used "
        f"{statistics.median(client):.2f} ms CPU per request (median), on the "
        f"same {os.cpu_count()} cores as the server."
    )
    return met


def write_json(path: Path, measures: list[Measure]) -> None:
    path.write_text(json.dumps([asdict(m) for m in measures], indent=2) + "\n")


# -- main -------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--source",
        action="append",
        type=Path,
        help="project directory to serve (repeat to compare; default: this one)",
    )
    parser.add_argument("--page", action="append", choices=sorted(PAGES))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--results", type=int, default=300, help="results of the run")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the server (repeatable)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    python = sys.executable
    binary = hey_binary()
    sources = [path.resolve() for path in (args.source or [ROOT])]
    pages = args.page or DEFAULT_PAGES
    extra = dict(item.split("=", 1) for item in args.env)
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-http-bench-"))
    measures: list[Measure] = []
    try:
        prepared = {}
        for n, source in enumerate(sources):
            data_dir = workdir / f"source-{n}"
            env = server_env(source, data_dir, extra)
            note(f"migrating and seeding {data_dir} with the code of {source}")
            prepared[source] = (env, prepare(python, source, data_dir, env), data_dir)
        for repetition in range(1, args.repeat + 1):
            for source in sources:
                env, seeded, data_dir = prepared[source]
                with daphne(python, source, env, data_dir / "daphne.log") as (
                    proc,
                    base,
                ):
                    session = login(base, seeded["username"], seeded["password"])
                    for page in pages:
                        path, credentials = PAGES[page]
                        measure = measure_page(
                            binary=binary,
                            base=base,
                            server_pid=proc.pid,
                            source=str(source),
                            page=page,
                            path=path.format(run_id=seeded["run_id"]),
                            headers=headers_for(
                                credentials, session, seeded["api_key"]
                            ),
                            requests=args.requests,
                            concurrency=args.concurrency,
                            repetition=repetition,
                        )
                        note(
                            f"#{repetition} {source.name} {page}: "
                            f"{measure.rps:.0f} req/s, p95 {measure.p95_ms:.0f} ms, "
                            f"{measure.errors} errors, "
                            f"{measure.server_cpu_ms_per_request:.2f} ms CPU/req"
                        )
                        measures.append(measure)
                        if args.json_out:  # as it goes: a long comparison may stop
                            write_json(args.json_out, measures)
    finally:
        if args.keep:
            note(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    met = report(measures, [str(s) for s in sources], pages)
    errors = sum(m.errors for m in measures)
    if errors:
        note(f"{errors} requests failed")
        return 1
    if not met:
        note("below goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Large request bodies against a real Daphne: server memory and other requests' delay.

Each case starts a fresh Daphne on a freshly migrated SQLite database, measures
its resident memory, then sends one large POST (200 MB by default) over a raw
socket while another thread keeps fetching the login page. It reports the
status the large POST got, the server's peak resident memory (``VmHWM``) above
what it used before, and how much longer the slowest login page took during
the upload than the slowest one before it.

    .venv/bin/python bench/body_limit.py                 # every case
    .venv/bin/python bench/body_limit.py anonymous_api   # one or more by name
    .venv/bin/python bench/body_limit.py --mb 50 --json-out body.json

Linux only (it reads /proc). Goals: an anonymous POST costs under 100 MB of
server memory and delays other requests by under 0.5 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, env_for, free_port

CHUNK = 1024 * 1024
BOUNDARY = "evalsitebenchboundary"
GOAL_MEMORY_MB = 100
GOAL_DELAY_SECONDS = 0.5

SETUP = """
from django.contrib.auth.models import User
from runs.projects.services import api_key_create, project_create
user = User.objects.create_user("bench", password="bench-password-1")
project = project_create(name="Bench", owner=user)
print(project.pk, api_key_create(user=user, name="bench")[1])
"""


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    authenticated: bool
    chunked: bool = False
    env: tuple[tuple[str, str], ...] = ()
    made_up_key: bool = False
    what: str = ""


CASES = [
    Case("anonymous_api", "/api/v1/datasets/upload", False, what="anonymous, API"),
    Case("anonymous_page", "/datasets/upload/", False, what="anonymous, page"),
    Case(
        "anonymous_chunked",
        "/api/v1/datasets/upload",
        False,
        chunked=True,
        what="anonymous, API, chunked (no Content-Length)",
    ),
    Case(
        "bearer_made_up",
        "/api/v1/datasets/upload",
        True,
        made_up_key=True,
        what="a made-up bearer key, API",
    ),
    Case(
        "bearer_over_limit",
        "/api/v1/datasets/upload",
        True,
        env=(("EVALSITE_MAX_DATASET_BYTES", str(50 * 1024 * 1024)),),
        what="bearer key, dataset limit 50 MB",
    ),
    Case(
        "bearer_upload",
        "/api/v1/datasets/upload",
        True,
        what="bearer key, within the dataset limit (the file is invalid at line 1)",
    ),
]


@dataclass
class Outcome:
    case: str
    what: str
    body_mb: float
    status: int | None
    seconds: float
    rss_before_mb: float
    peak_rss_mb: float
    extra_memory_mb: float
    slowest_probe_before_s: float
    slowest_probe_during_s: float
    delay_s: float
    probes_during: int
    probe_errors: int


def proc_memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


def setup(data_dir: Path, env: dict[str, str]) -> tuple[int, str]:
    manage = [sys.executable, "manage.py"]
    run = {"cwd": ROOT, "env": env, "check": True, "stdin": subprocess.DEVNULL}
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], **run)
    out = subprocess.run(
        [*manage, "shell", "-c", SETUP], capture_output=True, text=True, **run
    ).stdout.split()
    return int(out[-2]), out[-1]


def start_daphne(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-p", str(port), "evalsite.asgi:application"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            probe(port)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("daphne did not answer")


def probe(port: int) -> float:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", "/login/")
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise OSError(f"login page answered {response.status}")
    finally:
        conn.close()
    return time.perf_counter() - start


def body_chunks(project: int, size: int) -> Iterator[bytes]:
    head = (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="project"\r\n\r\n'
        f"{project}\r\n"
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
        # An invalid first line: an import that reads the file stops there.
        "not json\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    yield head
    line = b'{"id": "x", "input": "' + b"a" * 100 + b'"}\n'
    block = line * (CHUNK // len(line))
    remaining = size - len(head) - len(tail)
    while remaining > 0:
        piece = block[:remaining]
        remaining -= len(piece)
        yield piece
    yield tail


def send_large(port: int, case: Case, project: int, key: str, size: int) -> int | None:
    headers = [
        f"POST {case.path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
    ]
    headers.append(
        "Transfer-Encoding: chunked" if case.chunked else f"Content-Length: {size}"
    )
    if case.authenticated:
        headers.append(
            f"Authorization: Bearer {'made-up' if case.made_up_key else key}"
        )
    sock = socket.create_connection(("127.0.0.1", port), timeout=600)
    try:
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        try:
            for chunk in body_chunks(project, size):
                if case.chunked:
                    chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
                sock.sendall(chunk)
            if case.chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # refused early: the server closed the connection
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
        except (OSError, http.client.HTTPException):
            return None
        response.read()
        return response.status
    finally:
        sock.close()


def run_case(case: Case, size: int) -> Outcome:
    data_dir = Path(tempfile.mkdtemp(prefix="evalsite-body-"))
    try:
        env = env_for(data_dir, dict(case.env))
        env["EVALSITE_DEBUG"] = "0"
        project, key = setup(data_dir, env)
        port = free_port()
        proc = start_daphne(env, port)
        try:
            before = [probe(port) for _ in range(20)]
            rss_before = proc_memory_mb(proc.pid, "VmRSS")
            during: list[float] = []
            errors = 0
            done = threading.Event()

            def keep_probing() -> None:
                nonlocal errors
                while not done.is_set():
                    try:
                        during.append(probe(port))
                    except OSError:
                        errors += 1
                    time.sleep(0.02)

            prober = threading.Thread(target=keep_probing)
            prober.start()
            start = time.perf_counter()
            status = send_large(port, case, project, key, size)
            seconds = time.perf_counter() - start
            time.sleep(0.5)  # what the server still does after answering
            done.set()
            prober.join()
            peak = proc_memory_mb(proc.pid, "VmHWM")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        return Outcome(
            case=case.name,
            what=case.what,
            body_mb=round(size / CHUNK, 1),
            status=status,
            seconds=round(seconds, 2),
            rss_before_mb=round(rss_before, 1),
            peak_rss_mb=round(peak, 1),
            extra_memory_mb=round(peak - rss_before, 1),
            slowest_probe_before_s=round(max(before), 3),
            slowest_probe_during_s=round(max(during, default=0.0), 3),
            delay_s=round(max(max(during, default=0.0) - max(before), 0.0), 3),
            probes_during=len(during),
            probe_errors=errors,
        )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help="names: " + ", ".join(CASES_BY))
    parser.add_argument("--mb", type=float, default=200, help="body size in MiB")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    chosen = [CASES_BY[name] for name in args.cases] if args.cases else CASES
    outcomes = []
    for case in chosen:
        outcome = run_case(case, int(args.mb * CHUNK))
        outcomes.append(outcome)
        goal = ""
        if not case.authenticated:
            met = (
                outcome.extra_memory_mb < GOAL_MEMORY_MB
                and outcome.delay_s < GOAL_DELAY_SECONDS
            )
            goal = "  goal met" if met else "  below goal"
        print(
            f"{case.name:18} status {outcome.status}  {outcome.seconds:6.2f} s  "
            f"memory +{outcome.extra_memory_mb:7.1f} MB "
            f"(peak {outcome.peak_rss_mb:.0f} MB)  "
            f"delay {outcome.delay_s:5.2f} s "
            f"({outcome.probes_during} probes, {outcome.probe_errors} errors)" + goal,
            flush=True,
        )
    if args.json_out:
        args.json_out.write_text(
            json.dumps([asdict(o) for o in outcomes], indent=2) + "\n"
        )
    return 0


CASES_BY = {case.name: case for case in CASES}

if __name__ == "__main__":
    os.environ.pop("DJANGO_SETTINGS_MODULE", None)
    sys.exit(main())

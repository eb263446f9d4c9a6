"""The pages of bench/http_bench.py, called in-process: Django's CPU per request
without a server, a network or a load generator.

For each source directory (default: this checkout) a fresh embedded data
directory is migrated and seeded with ``http_seed.py``, then a subprocess with
that source first on its path sends each page ``--requests`` times through
Django's test client (signed in, or with the bearer key for the API) after 30
unmeasured requests, and reports the median and mean CPU time per request
(``time.process_time``). With several sources the subprocesses alternate
(A B A B ...) ``--repeat`` times; the report gives each page's minimum and
median of the per-process medians.

    .venv/bin/python bench/http_inprocess.py
    .venv/bin/python bench/http_inprocess.py --repeat 3 --source /tmp/before --source .
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from http_bench import seed_script  # beside this script, on its path

HERE = Path(__file__).resolve().parent
PAGES = ("login", "runs", "api_runs", "results")

_CHILD = r"""
import json, os, statistics, sys, time
import django
django.setup()
from django.contrib.auth.models import User
from django.test import Client

seeded = json.loads(os.environ["BENCH_SEEDED"])
requests = int(os.environ["BENCH_REQUESTS"])
signed_in = Client()
signed_in.force_login(User.objects.get(username=seeded["username"]))
bearer = {"HTTP_AUTHORIZATION": "Bearer " + seeded["api_key"]}
pages = {
    "login": (Client(), "/login/", {}),
    "runs": (signed_in, "/", {}),
    "api_runs": (Client(), "/api/v1/runs", bearer),
    "results": (signed_in, "/runs/%d/" % seeded["run_id"], {}),
}
out = {}
for name, (client, path, headers) in pages.items():
    for _ in range(30):
        response = client.get(path, **headers)
        assert response.status_code == 200, (name, response.status_code)
    times = []
    for _ in range(requests):
        start = time.process_time()
        client.get(path, **headers)
        times.append(time.process_time() - start)
    out[name] = {
        "median_ms": statistics.median(times) * 1000,
        "mean_ms": statistics.fmean(times) * 1000,
    }
print(json.dumps(out))
"""


def environment(source: Path, data_dir: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "EVALSITE_DEBUG")
    }
    env.update(
        EVALSITE_DATA_DIR=str(data_dir),
        PYTHONPATH=str(source),
        DJANGO_SETTINGS_MODULE="evalsite.settings",
    )
    return env


def prepare(source: Path, data_dir: Path) -> str:
    env = environment(source, data_dir)
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=source,
        env=env,
        check=True,
    )
    seeded = subprocess.run(
        [python, str(seed_script(source))],
        cwd=source,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return seeded.strip().splitlines()[-1]


def measure(source: Path, data_dir: Path, seeded: str, requests: int) -> dict:
    env = environment(source, data_dir)
    env.update(BENCH_SEEDED=seeded, BENCH_REQUESTS=str(requests))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=source,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", action="append", type=Path)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    sources = [path.resolve() for path in (args.source or [HERE.parent])]
    medians: dict[tuple[Path, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="evalsite-inprocess-") as tmp:
        seeded = {}
        for n, source in enumerate(sources):
            data_dir = Path(tmp) / f"source-{n}"
            data_dir.mkdir()
            seeded[source] = (data_dir, prepare(source, data_dir))
        for _ in range(args.repeat):
            for source in sources:
                data_dir, seed = seeded[source]
                figures = measure(source, data_dir, seed, args.requests)
                for page in PAGES:
                    medians.setdefault((source, page), []).append(
                        figures[page]["median_ms"]
                    )
    print(f"{'source':40} {'page':10} {'min ms':>8} {'median ms':>10}")
    for source in sources:
        for page in PAGES:
            values = medians[(source, page)]
            print(
                f"{source!s:40} {page:10} {min(values):8.2f}"
                f" {statistics.median(values):10.2f}"
            )
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

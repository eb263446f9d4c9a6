"""Dataset import benchmarks: another writer's wait, and a YAML bomb's memory.

    .venv/bin/python bench/imports.py                 # both scenarios
    .venv/bin/python bench/imports.py writer-wait --items 100000
    .venv/bin/python bench/imports.py yaml-bomb
    .venv/bin/python bench/imports.py writer-wait --code /path/to/other/checkout

``writer-wait`` migrates a fresh SQLite database (embedded mode), writes a JSONL
dataset of N items, and runs ``manage.py import_dataset`` on it in its own
process while this process writes to the same database every 20 ms, as the
server does (an API key's ``last_used_at``, a run's results): one short
``BEGIN IMMEDIATE`` transaction each, timed from BEGIN to COMMIT. It reports
the longest and the 99th-percentile wait during the import.

``yaml-bomb`` parses a "billion laughs" YAML file (under 600 bytes; 9**10
strings were it expanded) in a child process limited to 1 GiB of address
space, and reports the child's peak resident memory beside that of a child
that parses a tiny valid file, and the time to refuse it.

``--code`` runs the import from another checkout of the project (with this
virtual environment), to compare figures before and after a change.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRITE_EVERY = 0.02
SCENARIOS = ("writer-wait", "yaml-bomb")


def _env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env["EVALSITE_DATA_DIR"] = str(data_dir)
    return env


def _manage(code: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(code / "manage.py"), *args],
        cwd=code,
        env=_env(data_dir),
        capture_output=True,
        text=True,
        check=False,
    )


def _dataset(path: Path, count: int) -> None:
    with path.open("w") as out:
        for n in range(count):
            row = {
                "id": f"q{n}",
                "input": f"What is {n} + {n}?",
                "expected": str(2 * n),
            }
            out.write(json.dumps(row) + "\n")


class Writer(threading.Thread):
    """Short write transactions every WRITE_EVERY seconds, each one timed."""

    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.waits: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        conn = sqlite3.connect(self.db, timeout=120, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 120000")
        n = 0
        while not self.stop.is_set():
            started = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE runs_project SET description = ? WHERE id = 1", (n,))
            conn.execute("COMMIT")
            self.waits.append(time.perf_counter() - started)
            n += 1
            self.stop.wait(WRITE_EVERY)
        conn.close()


def writer_wait(code: Path, items: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="evalsite-bench-") as tmp:
        data_dir = Path(tmp)
        migrated = _manage(code, data_dir, "migrate", "--no-input")
        if migrated.returncode:
            raise SystemExit(migrated.stderr)
        db = data_dir / "evalsite.sqlite3"
        with sqlite3.connect(db) as conn:
            conn.execute(
                "INSERT INTO runs_project (id, name, description, created_at) "
                "VALUES (1, 'Bench', '', datetime('now'))"
            )
        dataset = data_dir / "items.jsonl"
        _dataset(dataset, items)
        writer = Writer(db)
        writer.start()
        time.sleep(0.5)  # some writes before the import, for the baseline
        before = len(writer.waits)
        started = time.perf_counter()
        imported = _manage(
            code, data_dir, "import_dataset", str(dataset), "--project", "Bench"
        )
        import_seconds = time.perf_counter() - started
        during = writer.waits[before:]
        writer.stop.set()
        writer.join()
        if imported.returncode:
            raise SystemExit(imported.stderr)
    during.sort()
    return {
        "items": items,
        "import_process_seconds": round(import_seconds, 2),
        "writes_during_import": len(during),
        "writer_wait_max_seconds": round(during[-1], 3),
        "writer_wait_p99_seconds": round(during[int(0.99 * (len(during) - 1))], 3),
        "writer_wait_median_seconds": round(statistics.median(during), 4),
        "import_output": imported.stdout.strip(),
    }


PARSE = """
import json, os, sys, time
sys.path.insert(0, {code!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
import django
django.setup()
from runs.datasets.importers import parse_items
started = time.perf_counter()
try:
    parse_items(content=open({path!r}, "rb").read(), filename="x.yaml")
    outcome = "accepted"
except MemoryError:
    outcome = "MemoryError"
except Exception as exc:
    outcome = f"{{type(exc).__name__}}: {{exc}}"
print(json.dumps({{"outcome": outcome, "seconds": time.perf_counter() - started}}))
"""


def _laughs(levels: int) -> bytes:
    lines = ["- input: x", "  laughs:", '    a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"    a{level}: &a{level} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _parse_in_child(code: Path, content: bytes, data_dir: Path) -> dict[str, Any]:
    path = data_dir / "input.yaml"
    path.write_bytes(content)
    child = subprocess.Popen(
        [sys.executable, "-c", PARSE.format(code=str(code), path=str(path))],
        cwd=code,
        env=_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limit_memory,
    )
    _, status, usage = os.wait4(child.pid, 0)
    out = child.stdout.read().strip() if child.stdout else ""
    try:
        report = json.loads(out)
    except ValueError:  # the child died before reporting
        report = {"outcome": child.stderr.read()[-300:] if child.stderr else ""}
    return {
        "bytes": len(content),
        "outcome": report["outcome"],
        "parse_seconds": round(report["seconds"], 4) if "seconds" in report else None,
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "exit_status": os.waitstatus_to_exitcode(status),
    }


def yaml_bomb(code: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="evalsite-bench-") as tmp:
        data_dir = Path(tmp)
        baseline = _parse_in_child(code, b"- {input: a, expected: b}\n", data_dir)
        bomb = _parse_in_child(code, _laughs(10), data_dir)
    return {
        "baseline": baseline,
        "bomb": bomb,
        "extra_peak_rss_mib": round(bomb["peak_rss_mib"] - baseline["peak_rss_mib"], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="writer-wait, yaml-bomb")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to run")
    args = parser.parse_args(argv)
    scenarios = args.scenarios or list(SCENARIOS)
    if unknown := set(scenarios) - set(SCENARIOS):
        parser.error(f"unknown scenario {sorted(unknown)}; choose from {SCENARIOS}")
    results: dict[str, Any] = {"code": str(args.code), "python": sys.version.split()[0]}
    if "writer-wait" in scenarios:
        results["writer-wait"] = writer_wait(args.code.resolve(), args.items)
    if "yaml-bomb" in scenarios:
        results["yaml-bomb"] = yaml_bomb(args.code.resolve())
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

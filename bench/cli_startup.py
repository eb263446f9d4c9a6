"""Start-up of the command line: `evalrun`'s wall time beyond its run phase.

    .venv/bin/python bench/cli_startup.py                  # 7 runs of 2 items
    .venv/bin/python bench/cli_startup.py --runs 15 --items 2
    .venv/bin/python bench/cli_startup.py --code /path/to/other/checkout
    .venv/bin/python bench/cli_startup.py --code /tmp/before --code .  # alternately
    .venv/bin/python bench/cli_startup.py --profile        # where the time goes

A fresh SQLite database (embedded mode) is migrated once, with one user, and
the fake model server started on a free port. Then ``manage.py evalrun FILE
--target openai_chat --scorer exact_match --json`` runs ``--runs`` times, one
after the other, each in its own process over the same ``--items``-item file.
For each, the overhead is the process's wall time minus the run phase it
reports (``wall_seconds`` of ``--json``: from the executor's start of the run
to its end): interpreter start-up, imports, Django's set-up, the dataset
import, the run's creation and the report. The figure is the median overhead
(and its range), with the CPU time of the process (user + system). Bytecode
is cached in the temporary directory, as an installed system has it, and one
uncounted run fills that cache first.

On a loaded machine most of that wall time is spent waiting for a processor.
On Linux the kernel counts that wait for each thread (``/proc/PID/schedstat``):
the overhead less the time the process's main thread waited to be scheduled
is printed too, as an estimate of the overhead on an idle machine. It can be
off both ways by a little: the main thread's waits during the run phase are
taken off too (at most the run phase's length), and the waits of the
process's other threads (its database calls) are left in.

``--code`` runs ``evalrun`` from another checkout (with this virtual
environment and this checkout's fake server), to compare before and after a
change; given twice or more, the checkouts' runs alternate (each with its own
database), so that a changing load weighs on each alike, and each gets its
figures. ``--profile`` runs one more ``evalrun`` under ``-X importtime`` and
prints the slowest imports (cumulative, in ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env["EVALSITE_DATA_DIR"] = str(data_dir)
    # Bytecode cached as on an installed system (pip compiles it), outside
    # the checkouts: compiling a hundred modules at every start would be
    # counted otherwise when the environment forbids writing bytecode.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(data_dir / "bytecode")
    env.setdefault("EVALSITE_TARGET_ALLOW", "loopback")  # the fake server
    return env


def _prepare(code: Path, data_dir: Path) -> None:
    """Migrated, with one user: the older command needs both made by hand."""
    for args in (
        ["migrate", "--no-input", "-v", "0"],
        [
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "get_user_model().objects.create_user('researcher')",
        ],
    ):
        subprocess.run(
            [sys.executable, str(code / "manage.py"), *args],
            cwd=code,
            env=_env(data_dir),
            check=True,
            capture_output=True,
        )


def _fake_server() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "runs.testing.fake_openai", "--port", "0"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()  # printed once the port is bound
    return server, line.rsplit(" ", 1)[-1].strip()


def _cpu_wait(pid: int) -> float | None:
    """Seconds the process's main thread waited for a processor (Linux)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _evalrun(
    code: Path, data_dir: Path, dataset: Path, base_url: str
) -> tuple[float, float, float | None]:
    """(process wall seconds, its run phase, its main thread's waits for a
    processor, when the system says)."""
    args = [
        sys.executable,
        str(code / "manage.py"),
        "evalrun",
        str(dataset),
        *("--target", "openai_chat", "--base-url", base_url, "--model", "fake"),
        *("--scorer", "exact_match", "--json"),
    ]
    # Its output goes to files, not pipes: the process is waited for as it
    # ends, and its counters read, before it is reaped.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            args, cwd=code, env=_env(data_dir), stdout=out, stderr=err, text=True
        )
        waited = None
        if hasattr(os, "waitid"):
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
            wall = time.perf_counter() - started
            waited = _cpu_wait(process.pid)
            process.wait()
        else:
            process.wait()
            wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"evalrun exited {process.returncode}:\n{err.read()}")
        return wall, float(json.loads(out.read())["wall_seconds"]), waited


def _slowest_imports(stderr: str, count: int = 15) -> list[tuple[int, str]]:
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:count]


def _summary(code: Path, rows: list[tuple[float, float, float, float | None]]) -> None:
    overheads = [wall - phase for wall, phase, _, _ in rows]
    median = statistics.median(overheads)
    print(
        f"{code}: beyond the run phase, median {median:.3f} s "
        f"(min {min(overheads):.3f}, max {max(overheads):.3f}) over "
        f"{len(rows)} runs; CPU median "
        f"{statistics.median(cpu for _, _, cpu, _ in rows):.3f} s; load "
        f"average {os.getloadavg()[0]:.1f}"
    )
    # Beyond the run phase, less the waits for a processor.
    idle = [w - p - waited for w, p, _, waited in rows if waited is not None]
    if idle:
        print(
            "  beyond the run phase less the main thread's waits for a "
            f"CPU (an idle machine's estimate): median "
            f"{statistics.median(idle):.3f} s (min {min(idle):.3f}, "
            f"max {max(idle):.3f})"
        )


def _profile(code: Path, data_dir: Path, dataset: Path, base_url: str) -> None:
    process = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(code / "manage.py"),
            "evalrun",
            str(dataset),
            *("--target", "openai_chat", "--base-url", base_url),
            *("--model", "fake", "--scorer", "exact_match", "--json"),
        ],
        cwd=code,
        env=_env(data_dir),
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"{code}: slowest imports (cumulative ms):")
    for micros, name in _slowest_imports(process.stderr):
        print(f"  {micros / 1000:8.1f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--items", type=int, default=2)
    parser.add_argument(
        "--code",
        type=Path,
        action="append",
        help="checkout to run (default: this one); repeated, run alternately",
    )
    parser.add_argument(
        "--profile", action="store_true", help="also list the slowest imports"
    )
    args = parser.parse_args()
    codes = [code.resolve() for code in args.code or [ROOT]]
    server, base_url = _fake_server()
    try:
        with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
            dataset = Path(tmp) / "items.jsonl"
            with dataset.open("w") as f:
                for i in range(args.items):
                    row = {"id": f"q{i}", "input": f"What is {i} + 1?"}
                    f.write(json.dumps(row | {"expected": str(i + 1)}) + "\n")
            data_dirs = {}
            for n, code in enumerate(codes):
                data_dirs[code] = data_dir = Path(tmp) / str(n)
                data_dir.mkdir()
                _prepare(code, data_dir)
                _evalrun(code, data_dir, dataset, base_url)  # fills the bytecode cache
            rows: dict[Path, list[tuple[float, float, float, float | None]]] = {
                code: [] for code in codes
            }
            for _ in range(args.runs):
                for code in codes:
                    before = os.times()
                    wall, phase, waited = _evalrun(
                        code, data_dirs[code], dataset, base_url
                    )
                    after = os.times()
                    cpu = (after.children_user - before.children_user) + (
                        after.children_system - before.children_system
                    )
                    rows[code].append((wall, phase, cpu, waited))
                    line = (
                        f"wall {wall:.3f} s  run phase {phase:.3f} s  "
                        f"beyond it {wall - phase:.3f} s  cpu {cpu:.3f} s"
                    )
                    if waited is not None:
                        line += f"  waited for a CPU {waited:.3f} s"
                    if len(codes) > 1:
                        line = f"{code.name}: {line}"
                    print(line, flush=True)
            print(f"{args.items} items a run")
            for code in codes:
                _summary(code, rows[code])
            if args.profile:
                for code in codes:
                    _profile(code, data_dirs[code], dataset, base_url)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()

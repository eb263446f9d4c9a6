"""Processes and measurements for the benchmarks in ``run.py``.

A case migrates a fresh SQLite database in a temporary directory, writes a
JSONL dataset of arithmetic items, starts the fake OpenAI server in its own
process, runs ``manage.py evalrun ... --json`` in another one (measured with
``wait4``), and reads back what the database holds for the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
SCORER = "exact_match"


@dataclass
class ChildRun:
    """One evalrun process: its report, exit code and resource usage."""

    argv: list[str]
    exit_code: int
    summary: dict[str, Any] | None
    stderr: str
    peak_rss_kib: int
    cpu_seconds: float
    process_seconds: float
    killed_by_watchdog: bool


@dataclass
class Settings:
    python: str
    scale: float
    concurrency: int | None
    max_seconds: float
    keep: bool
    profile_dir: Path | None
    seed: int
    extra_env: dict[str, str] = field(default_factory=dict)
    # A PostgreSQL server URL: each case then runs on a scratch database
    # created on it (and dropped), instead of SQLite.
    database: str | None = None


# -- processes -----------------------------------------------------------------


def env_for(
    data_dir: Path,
    extra: dict[str, str] | None = None,
    database_url: str | None = None,
) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env["EVALSITE_DATA_DIR"] = str(data_dir)
    # The fake model server listens on loopback, which the default network
    # policy refuses to targets.
    env.setdefault("EVALSITE_TARGET_ALLOW", "loopback,public")
    if database_url:
        env["DATABASE_URL"] = database_url
    return env | (extra or {})


@contextlib.contextmanager
def scratch_database(server_url: str | None, label: str) -> Iterator[str | None]:
    """A new PostgreSQL database on ``server_url``'s server, dropped at the end
    (None without a server: the case uses SQLite in its data directory)."""
    if not server_url:
        yield None
        return
    import psycopg
    from psycopg import sql

    name = "evalsite_bench_" + "".join(
        ch if ch.isalnum() else "_" for ch in label.lower()
    )
    name = f"{name}_{os.getpid()}_{random.randrange(16**6):06x}"
    admin = psycopg.connect(server_url, autocommit=True)
    try:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)
                )
            )
    finally:
        admin.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def migrate(
    settings: Settings, data_dir: Path, database_url: str | None = None
) -> None:
    """A fresh database with one user, whom evalrun acts as."""
    for command in (
        ["migrate", "--no-input", "-v", "0"],
        [
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "get_user_model().objects.create_user('bench')",
        ],
    ):
        subprocess.run(
            [settings.python, "manage.py", *command],
            cwd=ROOT,
            env=env_for(data_dir, settings.extra_env, database_url),
            check=True,
            stdin=subprocess.DEVNULL,
        )


def write_dataset(path: Path, count: int, seed: int) -> Path:
    rng = random.Random(seed)
    with path.open("w") as out:
        for i in range(count):
            a, b = rng.randrange(1000), rng.randrange(1000)
            row = {
                "id": f"q{i}",
                "input": f"What is {a} + {b}?",
                "expected": str(a + b),
            }
            out.write(json.dumps(row) + "\n")
    return path


@dataclass
class ServerProcess:
    base_url: str
    cpu_seconds: float | None = None  # known once it has stopped


@contextlib.contextmanager
def fake_server(
    settings: Settings, data_dir: Path, options: list[str]
) -> Iterator[ServerProcess]:
    """Start the fake OpenAI server on a free port, wait until it listens."""
    port = free_port()
    log = (data_dir / "fake-server.log").open("wb")
    module = "runs.testing.fake_openai"
    proc = subprocess.Popen(
        [settings.python, "-m", module, "--port", str(port), *options],
        cwd=ROOT,
        env=env_for(data_dir, settings.extra_env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                log.flush()
                tail = (data_dir / "fake-server.log").read_text()[-2000:]
                raise RuntimeError(f"fake server exited early:\n{tail}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        "fake server did not accept connections"
                    ) from None
                time.sleep(0.05)
        server = ServerProcess(f"http://127.0.0.1:{port}/v1")
        yield server
    finally:
        proc.terminate()
        reaped = reap(proc.pid, timeout=10)
        if reaped is None:
            proc.kill()
            reaped = reap(proc.pid, timeout=None)
        assert reaped is not None
        proc.returncode, usage = reaped
        log.close()
    # Whether the server, not evalrun, was the bottleneck shows in its CPU time.
    server.cpu_seconds = usage.ru_utime + usage.ru_stime


def reap(
    pid: int, *, timeout: float | None
) -> tuple[int, resource.struct_rusage] | None:
    """wait4 for one child: its exit code and usage, or None after ``timeout``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        flags = 0 if deadline is None else os.WNOHANG
        found, status, usage = os.wait4(pid, flags)
        if found:
            return os.waitstatus_to_exitcode(status), usage
        if deadline is not None and time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def run_measured(
    argv: list[str], *, env: dict[str, str], max_seconds: float
) -> ChildRun:
    """Run one child to its end; peak RSS and CPU time of that child via wait4."""
    done = threading.Event()
    fired = threading.Event()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )

        def watchdog() -> None:
            # os.kill, not Popen methods: those would reap the child behind wait4.
            if done.wait(max_seconds):
                return
            fired.set()
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)  # evalrun cancels the run
            if not done.wait(30):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)

        guard = threading.Thread(target=watchdog, daemon=True)
        guard.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            # Interrupted (Ctrl-C): let evalrun cancel its run, then insist.
            os.kill(proc.pid, signal.SIGTERM)
            if reap(proc.pid, timeout=30) is None:
                os.kill(proc.pid, signal.SIGKILL)
                reap(proc.pid, timeout=None)
            raise
        finally:
            done.set()
        elapsed = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    summary = None
    with contextlib.suppress(ValueError):
        lines = stdout.strip().splitlines()
        summary = json.loads(lines[-1]) if lines else None
    peak = usage.ru_maxrss // 1024 if sys.platform == "darwin" else usage.ru_maxrss
    return ChildRun(
        argv=argv,
        exit_code=proc.returncode,
        summary=summary if isinstance(summary, dict) else None,
        stderr=stderr,
        peak_rss_kib=peak,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        process_seconds=elapsed,
        killed_by_watchdog=fired.is_set(),
    )


# -- one evaluation ------------------------------------------------------------


@dataclass
class Case:
    """One evalrun against a fresh database, and what was stored."""

    items: int
    concurrency: int
    child: ChildRun
    stored: dict[str, Any]
    server_cpu_seconds: float | None


def run_case(
    settings: Settings,
    label: str,
    *,
    items: int,
    concurrency: int,
    server_options: list[str],
    evalrun_options: Sequence[str] = (),
) -> Case:
    concurrency = settings.concurrency or concurrency
    data_dir = Path(tempfile.mkdtemp(prefix=f"evalsite-bench-{label}-"))
    with scratch_database(settings.database, label) as database_url:
        return _run_case(
            settings,
            label,
            data_dir,
            database_url,
            items=items,
            concurrency=concurrency,
            server_options=server_options,
            evalrun_options=evalrun_options,
        )


def _run_case(
    settings: Settings,
    label: str,
    data_dir: Path,
    database_url: str | None,
    *,
    items: int,
    concurrency: int,
    server_options: list[str],
    evalrun_options: Sequence[str],
) -> Case:
    try:
        where = "PostgreSQL" if database_url else "SQLite"
        note(f"{label}: migrating a fresh {where} database, data in {data_dir}")
        migrate(settings, data_dir, database_url)
        dataset = write_dataset(data_dir / f"arith-{items}.jsonl", items, settings.seed)
        with fake_server(settings, data_dir, server_options) as server:
            prefix = [settings.python]
            if settings.profile_dir is not None:
                settings.profile_dir.mkdir(parents=True, exist_ok=True)
                out = settings.profile_dir / f"{label}.prof"
                prefix += ["-m", "cProfile", "-o", str(out)]
            argv = [
                *prefix,
                "manage.py",
                "evalrun",
                str(dataset),
                "--target",
                "openai_chat",
                "--base-url",
                server.base_url,
                "--model",
                "bench",
                "--scorer",
                SCORER,
                "--concurrency",
                str(concurrency),
                *evalrun_options,
                "--json",
            ]
            note(f"{label}: evalrun over {items} items, concurrency {concurrency}")
            child = run_measured(
                argv,
                env=env_for(data_dir, settings.extra_env, database_url),
                max_seconds=settings.max_seconds,
            )
        run_id = (child.summary or {}).get("run_id")
        stored = read_store(database_url or data_dir / "evalsite.sqlite3", run_id)
    finally:
        if settings.keep:
            note(f"{label}: kept {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
    return Case(
        items=items,
        concurrency=concurrency,
        child=child,
        stored=stored,
        server_cpu_seconds=server.cpu_seconds,
    )


def read_store(db: Path | str, run_id: int | None) -> dict[str, Any]:
    """What the database holds for the run: counts, duplicates, attempts.

    ``db`` is the SQLite file, or a PostgreSQL database's URL.
    """
    if run_id is None or (isinstance(db, Path) and not db.exists()):
        return {}
    if isinstance(db, Path):
        connection: Any = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        array_length = "json_array_length"
    else:
        import psycopg

        connection = _QmarkConnection(psycopg.connect(db))
        array_length = "jsonb_array_length"
    try:
        return _read_store(connection, run_id, array_length)
    finally:
        connection.close()


class _QmarkConnection:
    """psycopg with SQLite's ``?`` placeholders, for the queries below."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def execute(self, query: str, params: tuple[Any, ...] = ()) -> Any:
        return self.connection.execute(query.replace("?", "%s"), params)

    def close(self) -> None:
        self.connection.close()


def _read_store(db: Any, run_id: int, array_length: str) -> dict[str, Any]:
    where = "from runs_result where run_id = ?"
    (results,) = db.execute(f"select count(*) {where}", (run_id,)).fetchone()
    duplicates = db.execute(
        f"select item_id, epoch, count(*) {where}"
        " group by item_id, epoch having count(*) != 1",
        (run_id,),
    ).fetchall()
    by_status = db.execute(
        f"select status, error_kind, count(*) {where} group by 1, 2 order by 1, 2",
        (run_id,),
    ).fetchall()
    attempts = db.execute(
        f"select {array_length}(attempts), count(*) {where} group by 1 order by 1",
        (run_id,),
    ).fetchall()
    (items,) = db.execute(
        "select count(*) from runs_item where dataset_id ="
        " (select dataset_id from runs_run where id = ?)",
        (run_id,),
    ).fetchone()
    (run_error,) = db.execute(
        "select error from runs_run where id = ?", (run_id,)
    ).fetchone()
    return {
        "results": results,
        "duplicates": [list(row) for row in duplicates[:10]],
        "duplicate_count": len(duplicates),
        "by_status": {f"{s}/{k or '-'}": n for s, k, n in by_status},
        "status_counts": _sum_by_status(by_status),
        "attempts_per_result": {str(length): n for length, n in attempts},
        "attempts_total": sum((length or 0) * n for length, n in attempts),
        "dataset_items": items,
        "run_error": run_error,
    }


def _sum_by_status(rows: list[tuple[str, str, int]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status, _, n in rows:
        counts[status] = counts.get(status, 0) + n
    return counts


def note(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)

"""Run an untrusted Python program in a separate, confined, bounded process.

Model-generated code never runs in the web or executor process. Each program
runs in its own process tree, started here with asyncio (the loop only waits),
at most ``EVALSITE_SANDBOX_WORKERS`` at a time per process. Programs are
started and awaited on one loop of the process's own, asyncio's, whatever
loop the caller is on: uvloop (the executor's) cannot start a process as
another user, which the sandbox does as root. Where the
configured sandbox cannot run, nothing runs: ``mode()`` raises
SandboxUnavailable saying how to enable it (never a quieter fallback).

- **bubblewrap** (``EVALSITE_SANDBOX=auto``, the default, or ``bubblewrap``):
  fresh user, PID, network, IPC and UTS namespaces (``--unshare-all``), so no
  network at all; a root that holds only read-only binds of ``/usr`` (and the
  interpreter's own prefix when it lives elsewhere), a minimal ``/proc`` and
  ``/dev``, a 16 MB tmpfs on ``/dev/shm`` and a 64 MB one on ``/tmp``, the
  only writable places; ``--die-with-parent`` and ``--new-session``. The
  program runs as uid 65534 inside the namespace. When the server runs as
  root, bubblewrap itself runs as a fresh unprivileged uid, because the
  kernel does not apply the process-count limit to processes that are root
  outside their namespace.
- **limits** (``EVALSITE_SANDBOX=limits``, an operator's choice where user
  namespaces are unavailable; the server must run as root): each program as
  a fresh unprivileged uid with no groups, so it can neither read the
  server's own files (0600/0700), nor its ``/proc/<pid>/environ``, nor signal
  it; a seccomp filter (``no_new_privs``, inherited, not removable) denies
  ``socket()`` of every family, io_uring and System V IPC objects; where the
  kernel has Landlock, it reads only the system's directories and writes only
  its own empty directory. Afterwards every process of the uid is killed,
  its directory removed, and whatever the uid owns in ``/tmp``, ``/var/tmp``,
  ``/dev/shm`` and ``/run/lock`` deleted. Without Landlock it can read what
  any local user can (world-readable files) and write in world-writable
  directories while it runs.

In both modes the harness (``harness.py``, trusted code that runs
first in the child) sets the limits: wall time (enforced from outside: the
whole tree is killed), CPU seconds (``RLIMIT_CPU``), address space
(``RLIMIT_AS``), processes (``RLIMIT_NPROC``), file size (``RLIMIT_FSIZE``)
and open files (``RLIMIT_NOFILE``), each held to the operator's ceilings
(``EVALSITE_SANDBOX_MAX_*``); the output read back is capped, and a program
that prints more is stopped.

**What counts as a clean run.** The completion and the tests run in two
processes: the candidate's (forked before the harness reads anything
secret) executes the prompt and the completion as a module; the harness's
makes itself undumpable, reads a random nonce, runs the tests, and calls
into the candidate's process across pipes with plain data only (marshal of
None, bool, numbers, str, bytes, tuples, lists, dicts, sets), so what comes
back is a value, never one of the candidate's objects. The nonce is written
to a pipe the candidate's process does not hold, only after ``check``
returned; a pass needs exit status 0 and that nonce.

**What it cannot stop.** The candidate's own process is the candidate's: it
can hard-code answers it knows (public test sets), detect that it is being
tested, or misbehave only on inputs the tests do not use. Arguments it
mutates are not seen by the tests (they get copies), and a candidate that
must return something other than plain data (a class instance, a function,
a generator of objects) cannot be tested this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import marshal
import os
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import weakref
from asyncio import FIRST_COMPLETED
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from runs.pools.loops import LoopOwner, new_asyncio_loop, to_the_end
from runs.sandbox.outcome import Limits, Outcome, Program

__all__ = [
    "Limits",
    "Mode",
    "Outcome",
    "Program",
    "SandboxUnavailable",
    "mode",
    "reset",
    "run_program",
]

logger = logging.getLogger(__name__)

# The uid the program has inside the bubblewrap namespace ("nobody").
INNER_UID = 65534
# Fresh uids for the outside of a sandbox when the server runs as root: a
# range no distribution gives to users (below 2**31: bubblewrap prints uids as
# signed numbers), one random uid per program.
UID_RANGE = (1_500_000_000, 2_000_000_000)
TMPFS_BYTES = 64 * 1024 * 1024
# /dev/shm under bubblewrap: POSIX shared memory and semaphores need little.
SHM_BYTES = 16 * 1024 * 1024
# World-writable places a program of the limits mode could leave files in.
SWEPT = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")

# Runs first in the child, as ``python -I -S -c HARNESS <limits> <verdict fd>
# <no network> <landlock>``: the trusted tests' side (harness.py).
HARNESS = (Path(__file__).parent / "harness.py").read_text()

ENABLE_BUBBLEWRAP = (
    "Install bubblewrap (apt-get install bubblewrap) and let it create user "
    "namespaces: sysctl kernel.unprivileged_userns_clone=1 (Debian), "
    "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile "
    "for bwrap (Ubuntu), and in a container a seccomp profile that allows "
    "them (docker run --security-opt seccomp=... or --privileged). Or set "
    "EVALSITE_SANDBOX=limits, which needs the server to run as root and "
    "libseccomp: each program then runs as a fresh unprivileged uid, with "
    "sockets denied, and everything it started or wrote removed."
)


class SandboxUnavailable(Exception):
    """The configured sandbox cannot run programs on this machine."""


# -- configuration ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mode:
    name: str  # "bubblewrap" or "limits"
    python: str


_mode: Mode | None = None
# Where every program of this process is started and awaited (and probed).
_PROGRAMS = LoopOwner("evalsite-sandbox", new_asyncio_loop)
_semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
_semaphores = weakref.WeakKeyDictionary()


def _slots() -> asyncio.Semaphore:
    """This loop's bound on programs running at once."""
    loop = asyncio.get_running_loop()
    semaphore = _semaphores.get(loop)
    if semaphore is None:
        semaphore = asyncio.Semaphore(settings.EVALSITE_SANDBOX_WORKERS)
        _semaphores[loop] = semaphore
    return semaphore


def reset() -> None:
    """Forget the probed mode (after a settings change)."""
    global _mode
    _mode = None


def _as_root() -> bool:
    return os.geteuid() == 0


def _reachable_by_others(path: str) -> bool:
    """Whether a user with no groups of ours can execute ``path``."""
    current = Path(path)
    if not current.is_file() or not os.stat(current).st_mode & stat.S_IXOTH:
        return False
    return all(os.stat(parent).st_mode & stat.S_IXOTH for parent in current.parents)


def _python() -> str:
    """The interpreter programs run on: configured, else the server's, else python3."""
    configured = settings.EVALSITE_SANDBOX_PYTHON
    if configured:
        return configured
    candidates = [
        os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
        os.path.realpath(sys.executable),
        os.path.realpath(shutil.which("python3") or "/usr/bin/python3"),
        "/usr/bin/python3",
    ]
    usable = _reachable_by_others if _as_root() else _executable
    for candidate in candidates:
        if usable(candidate):
            return candidate
    raise SandboxUnavailable(
        "no Python interpreter an unprivileged user can run: set "
        "EVALSITE_SANDBOX_PYTHON"
    )


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _prefix(python: str) -> str | None:
    """The interpreter's installation when it lives outside /usr."""
    real = Path(os.path.realpath(python))
    if real.is_relative_to("/usr"):
        return None
    return str(real.parent.parent)


def bwrap_command(python: str) -> list[str]:
    """bubblewrap's arguments up to the command it runs."""
    command = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--uid", str(INNER_UID),
        "--gid", str(INNER_UID),
        "--die-with-parent",
        "--new-session",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    for name in ("bin", "lib", "lib32", "lib64", "sbin"):
        top = Path("/") / name
        if top.is_symlink():
            command += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            command += ["--ro-bind", str(top), str(top)]
    prefix = _prefix(python)
    if prefix:
        command += ["--ro-bind", prefix, prefix]
    command += [
        "--proc", "/proc",
        "--dev", "/dev",
        # --dev's own tmpfs has no size: /dev/shm gets a bounded one.
        "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
        "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
        "--chdir", "/tmp",
        "--setenv", "HOME", "/tmp",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--",
    ]  # fmt: skip
    return command


async def mode() -> Mode:
    """How this process runs programs; probed once, on first use.

    SandboxUnavailable, saying how to make it work, where the configured
    sandbox cannot run: code is never run less confined than configured.
    """
    if _mode is not None:
        return _mode
    return await _PROGRAMS.run_here(_mode_probed())


async def _mode_probed() -> Mode:
    """``mode()``, on the programs' loop."""
    global _mode
    if _mode is not None:
        return _mode
    wanted = settings.EVALSITE_SANDBOX
    python = _python()
    if wanted == "limits":
        problem = limits_problem(as_root=_as_root())
        if problem:
            raise SandboxUnavailable(f"EVALSITE_SANDBOX=limits: {problem}")
        found = Mode("limits", python)
        problem = await _probe(found)
        if problem:
            raise SandboxUnavailable(f"EVALSITE_SANDBOX=limits: {problem}")
        if not landlock_abi():
            logger.warning(
                "code execution, limits mode: the kernel has no Landlock, so "
                "programs can read every file a local user can read"
            )
    else:
        problem = await _probe_bwrap(python)
        if problem:
            raise SandboxUnavailable(
                f"code execution is refused: {problem}. {ENABLE_BUBBLEWRAP}"
            )
        found = Mode("bubblewrap", python)
    _mode = found
    return found


def limits_problem(*, as_root: bool) -> str:
    """Why the limits mode cannot run programs safely here, or "" when it can."""
    if not as_root:
        return (
            "the server must run as root, to start each program as a fresh "
            "unprivileged uid (as the server's own user a program could read "
            "the server's files and environment and signal it); run it as "
            "root, or make bubblewrap work and use EVALSITE_SANDBOX=auto"
        )
    return ""


async def _probe(current: Mode) -> str:
    """Run a trivial program as the mode would; why it failed, or ""."""
    program = Program(
        candidate="def f():\n    return 1\n",
        tests="def check(candidate):\n    assert candidate() == 1\n",
        entry_point="f",
    )
    outcome = await _run(program, Limits(wall_seconds=20), current)
    return "" if outcome.passed else f"a test program failed: {outcome.describe()}"


async def _probe_bwrap(python: str) -> str:
    """Why bubblewrap cannot run a program here, or "" when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (no bwrap on the PATH)"
    try:
        process = await asyncio.create_subprocess_exec(
            *bwrap_command(python),
            python,
            "-I",
            "-S",
            "-c",
            "pass",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            **_outside_user(),
        )
        async with asyncio.timeout(20):
            _, err = await process.communicate()
    except (OSError, TimeoutError) as exc:
        return f"bubblewrap did not start: {exc}"
    if process.returncode != 0:
        line = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return f"bubblewrap cannot create its namespaces ({line[0][:200]})"
    return ""


def _outside_user() -> dict[str, Any]:
    """As root: a fresh unprivileged uid for the process tree (Popen arguments)."""
    if not _as_root():
        return {}
    uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])
    return {"user": uid, "group": uid, "extra_groups": []}


# -- running ----------------------------------------------------------------------


async def run_program(program: Program, limits: Limits) -> Outcome:
    """Run ``program`` confined and bounded; never raises for what it does."""
    return await _PROGRAMS.run_here(_run_confined(program, limits))


async def _run_confined(program: Program, limits: Limits) -> Outcome:
    """``run_program``, on the programs' loop."""
    current = await _mode_probed()
    async with _slots():
        return await _run(program, limits.within_ceilings(), current)


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's, told when the harness exits even while others hold its pipes."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=65536, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        self.exited.set()
        super().process_exited()


async def _run(program: Program, limits: Limits, current: Mode) -> Outcome:
    nonce = secrets.token_hex(16).encode()
    outcome = Outcome(mode=current.name, limits=limits)
    identity = _outside_user()
    limited = current.name == "limits"
    workdir = None
    if current.name == "bubblewrap":
        command = bwrap_command(current.python)
    else:
        workdir = tempfile.mkdtemp(prefix="evalsite-sandbox-")
        os.chown(workdir, identity["user"], identity["group"])
        command = []
    read_end, write_end = os.pipe()
    numbers = (
        limits.cpu_seconds,
        limits.memory_mb * 1024 * 1024,
        limits.processes,
        limits.file_size_mb * 1024 * 1024,
        limits.open_files,
        write_end,
        int(limited),
        int(limited and landlock_abi() > 0),
    )
    command += [current.python, "-I", "-S", "-c", HARNESS, *map(str, numbers)]
    payload = (program.candidate, program.tests, program.entry_point)
    stdin = nonce + b"\n" + marshal.dumps(payload)
    process = None
    chunks: list[bytes] = []
    try:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            pass_fds=(write_end,),
            cwd=workdir,
            env=_environment(workdir),
            start_new_session=True,
            **identity,
        )
        process = asyncio.subprocess.Process(transport, protocol, loop)
        os.close(write_end)
        write_end = -1
        await _supervise(process, protocol.exited, stdin, outcome, chunks)
    finally:
        if write_end >= 0:
            os.close(write_end)
        try:
            # To its end even if a cancel comes meanwhile: cut short, it
            # would leave processes, the directory or the uid's files behind.
            await to_the_end(_clean_up(process, identity, current, workdir))
        finally:
            outcome.output = b"".join(chunks)[: limits.output_kb * 1024]
            outcome.verdict = _read_verdict(read_end) == nonce
            os.close(read_end)
    return outcome


async def _clean_up(
    process: asyncio.subprocess.Process | None,
    identity: dict[str, Any],
    current: Mode,
    workdir: str | None,
) -> None:
    """Kill what the program left running, remove its directory and, in the
    limits mode, whatever its uid left."""
    if process is not None:
        await _kill_tree(process, identity, current)
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
    if current.name == "limits":
        await asyncio.to_thread(_sweep, identity["user"])


def _environment(workdir: str | None) -> dict[str, str]:
    home = workdir or "/tmp"
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock version (Linux 5.13 and later), 0 without it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, libc.syscall(444, None, 0, 1))


async def _supervise(
    process: asyncio.subprocess.Process,
    exited: asyncio.Event,
    stdin: bytes,
    outcome: Outcome,
    chunks: list[bytes],
) -> None:
    """Feed the program, read its output up to the cap, wait up to the wall time.

    The run ends when the harness exits, though what it started may still
    hold its output open (they are killed next).
    """
    cap = outcome.limits.output_kb * 1024

    async def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            process.stdin.write(stdin)
            await process.stdin.drain()
        process.stdin.close()

    async def read() -> None:
        assert process.stdout is not None
        size = 0
        while chunk := await process.stdout.read(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                outcome.output_exceeded = True
                return

    reading = asyncio.ensure_future(read())
    ending = asyncio.ensure_future(exited.wait())
    try:
        async with asyncio.timeout(outcome.limits.wall_seconds):
            await feed()
            await asyncio.wait({reading, ending}, return_when=FIRST_COMPLETED)
            if not outcome.output_exceeded:
                await ending
                # What it printed before it exited is still in the pipe.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await reading
                outcome.returncode = process.returncode
    except TimeoutError:
        outcome.timed_out = True
    finally:
        for task in (reading, ending):
            task.cancel()
        await asyncio.gather(reading, ending, return_exceptions=True)


async def _kill_tree(
    process: asyncio.subprocess.Process, identity: dict[str, Any], current: Mode
) -> None:
    """Leave nothing of the program running, whatever it did."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        # bubblewrap's session; its PID namespace dies with it (--die-with-parent).
        os.killpg(process.pid, signal.SIGKILL)
    if identity and current.name == "limits":
        # Processes that left the session: everything of this fresh uid.
        kill = shutil.which("kill", path="/usr/bin:/bin") or "/bin/kill"
        killer = await asyncio.create_subprocess_exec(kill, "-KILL", "-1", **identity)
        await killer.wait()
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    # The process counts as ended once its output pipe has closed too: read
    # what the dead tree left in it (at most a pipe's buffer), unkept.
    if process.stdout is not None:
        while await process.stdout.read(65536):
            pass
    await process.wait()
    if identity:
        # The kernel tears a killed namespace down after its parent has gone:
        # return only when nothing of the program's uid is left.
        uid = identity["user"]
        pause = 0.001
        deadline = asyncio.get_running_loop().time() + 5
        while _processes_of(uid) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)


def _processes_of(uid: int) -> list[int]:
    """Live processes of ``uid``; zombies (dead, not yet reaped) do not count."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid and not _zombie(name):
                    found.append(int(name))
    return found


def _zombie(pid: str) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as stat_file:
        return stat_file.read().rpartition(b")")[2].split()[0] == b"Z"


def _sweep(uid: int) -> None:
    """Remove what ``uid`` (gone: no process of it is left) made where all may write.

    It could create entries only in world-writable directories (it has no
    group, and what it owns goes whole), so only those are searched.
    """
    pending = [root for root in SWEPT if os.path.isdir(root)]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if info.st_uid == uid:
                    if stat.S_ISDIR(info.st_mode):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
                    pending.append(entry.path)


def _read_verdict(read_end: int) -> bytes:
    os.set_blocking(read_end, False)
    try:
        return os.read(read_end, 256)
    except BlockingIOError:
        return b""

"""The leftover check counts this test process's sandboxes, not another pass's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.sandboxes import sandbox_processes

# A process that carries the harness's marker on its command line.
MARKED = [sys.executable, "-c", "import time; time.sleep(60)", "RLIMIT_NPROC"]


@contextmanager
def started(command: list[str]) -> Iterator[None]:
    process = subprocess.Popen(command, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not any(b"RLIMIT_NPROC" in line for line in _marked()):
            assert time.monotonic() < deadline, "the marked process never started"
            time.sleep(0.05)
        yield
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _marked() -> list[bytes]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                found.append(Path(f"/proc/{name}/cmdline").read_bytes())
            except OSError:
                continue
    return found


def test_a_sandbox_of_this_process_is_a_leftover():
    with started(MARKED):
        assert len(sandbox_processes()) == 1


def test_a_sandbox_under_another_pytest_is_not():
    # The other pass, as the process tree shows it: a pytest whose descendant
    # is a sandbox (``make test`` runs both passes at once).
    # The marker is put together in the child, so only the grandchild has it.
    other_pass = (
        "import subprocess, sys; "
        "subprocess.run([sys.executable, '-c', 'import time; time.sleep(60)', "
        "'RLIMIT_' + 'NPROC'])"
    )
    with started([sys.executable, "-c", other_pass, "pytest"]):
        assert sandbox_processes() == []

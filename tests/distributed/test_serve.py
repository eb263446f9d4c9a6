"""``manage.py serve --processes N``: N Daphne processes accept on one
address; a signal to ``serve`` stops them all, and one that dies stops the
others and fails the command, naming it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.workers import ROOT, wait_for, worker_env
from tests.processes import free_port

pytestmark = pytest.mark.django_db

SERVE = [sys.executable, "manage.py", "serve"]


class Served:
    """A ``serve`` process, its Daphne processes and its log."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path):
        self.process = process
        self.port = port
        self.log = log
        self.daphnes: list[int] = []

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_listening(self, count: int) -> list[int]:
        """The Daphne processes' pids, once ``count`` of them listen."""

        def listening() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited early:\n{self.text()}")
            return self.text().count("Listening on TCP address") >= count

        wait_for(listening, what=f"{count} Daphne processes listening")
        found = re.search(r"\(pids ([\d, ]+)\)", self.text())
        assert found, self.text()
        self.daphnes = [int(pid) for pid in found.group(1).split(", ")]
        return self.daphnes

    def get(self, awaited: str) -> int:
        """A GET on a connection of its own: its status."""
        url = f"http://127.0.0.1:{self.port}/login/"
        try:
            with urllib.request.urlopen(url, timeout=120) as answer:
                return answer.status
        except TimeoutError:
            raise AssertionError(f"{awaited}: no answer in 120 s") from None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Served]:
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*SERVE, "--port", str(port), "--processes", "2"],
            cwd=ROOT,
            env=worker_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    served = Served(process, port, log)
    try:
        yield served
    finally:
        for pid in [process.pid, *served.daphnes]:
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(60)


def test_two_processes_accept_on_the_one_address_and_stop_together(
    serve: Served,
) -> None:
    daphnes = serve.wait_listening(2)
    assert len(daphnes) == 2

    # Each, stopped, leaves the address to the other, which answers alone.
    for stopped in daphnes:
        os.kill(stopped, signal.SIGSTOP)
        try:
            awaited = f"an answer while Daphne process {stopped} is stopped"
            assert [serve.get(awaited) for _ in range(4)] == [200] * 4
        finally:
            os.kill(stopped, signal.SIGCONT)

    serve.process.send_signal(signal.SIGTERM)
    assert serve.process.wait(120) == 0, serve.text()
    for pid in daphnes:
        wait_for(lambda pid=pid: not alive(pid), what=f"Daphne process {pid} ended")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", serve.port), timeout=10).close()
    assert "serve: stopped" in serve.text()


def test_a_daphne_that_dies_stops_the_other_and_fails_the_command(
    serve: Served,
) -> None:
    first, second = serve.wait_listening(2)

    os.kill(first, signal.SIGKILL)

    assert serve.process.wait(120) == 1, serve.text()
    assert f"Daphne process 1 (pid {first}) was killed by SIGKILL" in serve.text()
    wait_for(lambda: not alive(second), what=f"the other Daphne, {second}, ended")


def test_serve_killed_takes_its_daphnes_with_it(serve: Served) -> None:
    """Killed with SIGKILL, serve passes nothing on: each Daphne is told by
    the kernel (its parent-death signal) and ends, freeing the address."""
    daphnes = serve.wait_listening(2)

    serve.process.kill()
    serve.process.wait(120)

    for pid in daphnes:
        wait_for(lambda pid=pid: not alive(pid), what=f"Daphne process {pid} ended")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", serve.port), timeout=10).close()


def test_several_processes_are_refused_in_the_embedded_mode(tmp_path: Path) -> None:
    env = worker_env(EVALSITE_DATA_DIR=str(tmp_path))
    for name in ("DATABASE_URL", "REDIS_URL", "EVALSITE_EXECUTOR"):
        env.pop(name)
    port = free_port()

    done = subprocess.run(
        [*SERVE, "--port", str(port), "--processes", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 2
    assert "--processes 2 needs the distributed mode" in done.stderr
    assert "runs execute inside the server process" in done.stderr
    assert "serve: http://" not in done.stderr  # nothing was started
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=10).close()

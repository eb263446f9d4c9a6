"""The limits mode (chosen by the operator, server as root): no network, no
server data, nothing left behind; and its refusal where it would not be safe."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs import sandbox
from tests.sandboxes import (  # noqa: F401  (fixtures)
    CORRECT,
    item,
    limits_only,
    sandbox_processes,
    score,
    work_directories,
)

pytestmark = [pytest.mark.usefixtures("limits_only"), pytest.mark.no_database]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory any user can enter (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="limits-test-"))
    path.chmod(0o755)
    yield path
    for child in path.iterdir():
        if child.is_dir():
            child.chmod(0o700)
            for inner in child.iterdir():
                inner.unlink()
            child.rmdir()
        else:
            child.unlink()
    path.rmdir()


async def test_a_correct_completion_passes_with_a_plain_reason():
    outcome = await score(CORRECT)
    assert outcome.passed is True
    assert outcome.reason == "check(add) passed"


async def test_reasons_say_what_happened():
    completions = [
        CORRECT,
        "    return a - b\n",
        CORRECT + "import os\nos._exit(0)\n",
        CORRECT + "while True:\n    pass\n",
    ]
    outcomes = await asyncio.gather(
        *(
            score(text, item(index=n), timeout_seconds=2)
            for n, text in enumerate(completions)
        )
    )
    assert [outcome.passed for outcome in outcomes] == [True, False, False, False]
    assert "AssertionError" in outcomes[1].reason
    assert "before its tests finished" in outcomes[2].reason
    assert "timed out after 2 s" in outcomes[3].reason


async def test_a_tcp_port_on_loopback_cannot_be_reached():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        connect = (
            CORRECT + "import socket\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        )
        outcome = await score(connect)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody came
    assert outcome.passed is False
    assert "PermissionError" in outcome.reason


async def test_a_unix_socket_cannot_be_reached(shared_dir: Path):
    path = shared_dir / "service.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        path.chmod(0o777)
        server.listen()
        server.setblocking(False)
        connect = (
            CORRECT + "import socket\n"
            "client = socket.socket(socket.AF_UNIX)\n"
            f"client.connect({str(path)!r})\n"
        )
        outcome = await score(connect)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert outcome.passed is False
    assert "PermissionError" in outcome.reason


async def test_io_uring_is_denied():
    ring = (
        CORRECT + "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "fd = libc.syscall(425, 4, params)\n"
        "assert fd < 0 and ctypes.get_errno() == 13, (fd, ctypes.get_errno())\n"
    )
    outcome = await score(ring)
    assert outcome.passed is True, outcome.reason


async def test_the_servers_files_cannot_be_read(shared_dir: Path):
    secret = shared_dir / "secret_key"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    private = shared_dir / "data"
    private.mkdir(mode=0o700)
    (private / "db.sqlite3").write_text("rows")
    (private / "db.sqlite3").chmod(0o644)
    for path in (secret, private / "db.sqlite3"):
        read = CORRECT + f"open({str(path)!r}).read()\n"
        outcome = await score(read)
        assert outcome.passed is False
        assert "PermissionError" in outcome.reason


async def test_the_servers_environment_cannot_be_read():
    read = (
        CORRECT + "import os\n"
        f"for pid in (os.getppid(), {os.getpid()}):\n"
        "    try:\n"
        "        open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except PermissionError:\n"
        "        continue\n"
        "    raise SystemExit(f'read the environment of {pid}')\n"
    )
    outcome = await score(read)
    assert outcome.passed is True, outcome.reason


async def test_the_server_cannot_be_signalled():
    kill = CORRECT + f"import os, signal\nos.kill({os.getpid()}, signal.SIGTERM)\n"
    outcome = await score(kill)
    assert outcome.passed is False
    assert "PermissionError" in outcome.reason


async def test_a_double_forked_sleeper_is_gone_after_the_run():
    escape = (
        CORRECT + "import os, time\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        time.sleep(120)\n"
        "    os._exit(0)\n"
    )
    outcome = await score(escape, timeout_seconds=5)
    assert outcome.passed is True, outcome.reason
    assert sandbox_processes() == []


PLACES = ["/tmp", "/var/tmp", "/dev/shm"]
LEAVE_FILES = (
    CORRECT + "import os\n"
    f"for place in {PLACES!r}:\n"
    "    try:\n"
    "        with open(f'{place}/left-by-a-program-{os.getuid()}', 'w') as out:\n"
    "            out.write('x')\n"
    "        os.makedirs(f'{place}/left-dir-{os.getuid()}/inner')\n"
    "    except PermissionError:\n"
    "        print('refused', place)\n"
)


def left_behind(before: dict[str, set[str]]) -> list[str]:
    return [
        f"{place}/{name}"
        for place in PLACES
        for name in set(os.listdir(place)) - before[place]
        if name.startswith(("left-by-a-program-", "left-dir-"))
    ]


async def test_files_written_where_anyone_may_write_are_removed(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)  # a kernel without it
    before = {place: set(os.listdir(place)) for place in PLACES}
    outcome = await score(LEAVE_FILES)
    assert outcome.passed is True, outcome.reason
    assert "refused" not in outcome.reason
    assert left_behind(before) == []
    assert work_directories() == []


@pytest.fixture
def landlock() -> None:
    if not sandbox.landlock_abi():
        # The machines CI runs on have it: there a missing Landlock is a failure.
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("this kernel has no Landlock (CI=true: not skipped)")
        pytest.skip("this kernel has no Landlock")


@pytest.mark.usefixtures("landlock")
async def test_with_landlock_it_writes_only_in_its_directory():
    before = {place: set(os.listdir(place)) for place in PLACES}
    outcome = await score(LEAVE_FILES + "raise SystemExit(1)\n")
    assert outcome.passed is False
    assert [f"refused {place}" in outcome.reason for place in PLACES] == [True] * len(
        PLACES
    )
    assert left_behind(before) == []


@pytest.mark.usefixtures("landlock")
async def test_with_landlock_a_world_readable_file_of_the_server_cannot_be_read(
    shared_dir: Path,
):
    database = shared_dir / "db.sqlite3"
    database.write_text("password hashes")
    database.chmod(0o644)
    read = CORRECT + f"open({str(database)!r}).read()\n"
    outcome = await score(read)
    assert outcome.passed is False
    assert "PermissionError" in outcome.reason


async def test_its_directory_is_empty_writable_and_removed_afterwards():
    use_dir = (
        CORRECT + "import os\n"
        "assert os.listdir('.') == [], os.listdir('.')\n"
        "open('scratch.txt', 'w').write('ok')\n"
    )
    outcome = await score(use_dir)
    assert outcome.passed is True, outcome.reason
    assert work_directories() == []


async def test_a_fork_bomb_is_bounded():
    bomb = CORRECT + "import os\nwhile True:\n    os.fork()\n"
    outcome = await score(bomb, processes=16, timeout_seconds=20)
    assert outcome.passed is False
    assert "Resource temporarily unavailable" in outcome.reason
    assert sandbox_processes() == []


async def test_a_server_that_is_not_root_refuses_the_limits_mode(
    monkeypatch: pytest.MonkeyPatch,
):
    sandbox.reset()
    monkeypatch.setattr(sandbox, "_as_root", lambda: False)
    with pytest.raises(sandbox.SandboxUnavailable, match="must run as root"):
        await score(CORRECT)


def test_the_limits_mode_is_refused_only_to_a_server_that_is_not_root():
    assert "must run as root" in sandbox.limits_problem(as_root=False)
    assert sandbox.limits_problem(as_root=True) == ""

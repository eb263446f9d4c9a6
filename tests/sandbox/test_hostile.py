"""Completions that attack the harness or the machine fail cleanly, under bubblewrap."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from runs import sandbox
from tests.sandboxes import (  # noqa: F401  (fixtures)
    CORRECT,
    bubblewrap,
    item,
    sandbox_processes,
    score,
    work_directories,
)

pytestmark = [pytest.mark.usefixtures("bubblewrap"), pytest.mark.no_database]

# Each at column 0 runs when the program is loaded, before the tests.
EXIT_EARLY = CORRECT + "import sys\nsys.exit(0)\n"
OS_EXIT_EARLY = CORRECT + "import os\nos._exit(0)\n"
EXIT_IN_CANDIDATE = "    import sys\n    sys.exit(0)\n"
REDEFINE_CHECK = "    return 0\n\ndef check(candidate):\n    pass\n"
FORGE_VERDICT = (
    CORRECT.replace("a + b", "0")
    + "import os\n"
    + "for fd in range(3, 64):\n"
    + "    try:\n"
    + "        os.write(fd, b'0' * 32 + b'\\n')\n"
    + "    except OSError:\n"
    + "        pass\n"
    + "os._exit(0)\n"
)
FORK_BOMB = CORRECT + "import os\nwhile True:\n    os.fork()\n"
COUNTED_FORKS = (
    CORRECT + "import os, time\n"
    "children = 0\n"
    "try:\n"
    "    while children < 500:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(60)\n"
    "            os._exit(0)\n"
    "        children += 1\n"
    "except OSError as exc:\n"
    "    raise SystemExit(f'fork refused after {children} children: {exc}')\n"
)
ALLOCATE = CORRECT + "hoard = []\nwhile True:\n    hoard.append(bytearray(10**7))\n"
LOOP = CORRECT + "while True:\n    pass\n"
FLOOD = CORRECT + "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
LEAVE_A_CHILD = (
    CORRECT + "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    time.sleep(120)\n"
)


async def test_sys_exit_before_the_tests_fails():
    outcome = await score(EXIT_EARLY)
    assert outcome.passed is False
    assert "exited with status 0 before its tests finished" in outcome.reason


async def test_os_exit_before_the_tests_fails():
    outcome = await score(OS_EXIT_EARLY)
    assert outcome.passed is False
    assert "exited with status 0 before its tests finished" in outcome.reason


async def test_sys_exit_inside_the_candidate_fails():
    outcome = await score(EXIT_IN_CANDIDATE)
    assert outcome.passed is False
    assert "before its tests finished" in outcome.reason


async def test_redefining_check_does_not_replace_the_tests():
    outcome = await score(REDEFINE_CHECK)
    assert outcome.passed is False
    assert "AssertionError" in outcome.reason


async def test_writing_a_verdict_to_every_descriptor_does_not_pass():
    outcome = await score(FORGE_VERDICT)
    assert outcome.passed is False
    assert "the candidate's process broke the protocol" in outcome.reason


async def test_a_fork_bomb_is_bounded_and_fails():
    outcome = await score(FORK_BOMB, processes=16, timeout_seconds=20)
    assert outcome.passed is False
    assert "Resource temporarily unavailable" in outcome.reason
    assert sandbox_processes() == []


async def test_the_process_limit_holds():
    outcome = await score(COUNTED_FORKS, processes=10, timeout_seconds=20)
    assert outcome.passed is False
    assert "fork refused after" in outcome.reason
    children = int(outcome.reason.split("fork refused after ")[1].split()[0])
    assert children <= 10
    assert sandbox_processes() == []


async def test_allocating_without_end_fails_with_memory_error():
    outcome = await score(ALLOCATE, memory_mb=256, timeout_seconds=30)
    assert outcome.passed is False
    assert "MemoryError" in outcome.reason


async def test_an_endless_loop_times_out_and_is_killed():
    outcome = await score(LOOP, timeout_seconds=1, cpu_seconds=60)
    assert outcome.passed is False
    assert outcome.reason == "timed out after 1 s (wall time); killed"
    assert sandbox_processes() == []


async def test_the_cpu_limit_stops_a_busy_program():
    outcome = await score(LOOP, timeout_seconds=60, cpu_seconds=1)
    assert outcome.passed is False
    assert "CPU time limit of 1 s exceeded (SIGXCPU)" in outcome.reason


async def test_a_timeout_is_a_failure_even_for_a_correct_program():
    slow = CORRECT + "import time\ntime.sleep(30)\n"
    outcome = await score(slow, timeout_seconds=0.5)
    assert outcome.passed is False
    assert "timed out" in outcome.reason


async def test_printing_without_end_is_stopped():
    outcome = await score(FLOOD, max_output_kb=16, timeout_seconds=30)
    assert outcome.passed is False
    assert outcome.reason == "printed more than 16 KB; stopped"
    assert sandbox_processes() == []


async def test_a_large_file_is_refused():
    write = CORRECT + "open('big', 'wb').write(b'x' * 3 * 1024 * 1024)\n"
    outcome = await score(write, file_size_mb=1)
    assert outcome.passed is False
    assert "File too large" in outcome.reason


async def test_a_socket_cannot_reach_the_host():
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
    assert "ConnectionRefusedError" in outcome.reason


async def test_no_outside_address_is_reachable():
    connect = CORRECT + "import socket\nsocket.create_connection(('1.1.1.1', 53), 3)\n"
    outcome = await score(connect)
    assert outcome.passed is False
    assert "Network is unreachable" in outcome.reason


@pytest.fixture
def open_dir(tmp_path: Path) -> Path:
    """A directory on the host that anyone may write to."""
    tmp_path.chmod(0o777)
    return tmp_path


async def test_writing_outside_its_directory_fails(open_dir: Path):
    target = open_dir / "escaped.txt"
    for path in (target, Path("/usr/escaped.txt")):
        write = CORRECT + f"open({str(path)!r}, 'w').write('out')\n"
        outcome = await score(write)
        assert outcome.passed is False
        assert "Error" in outcome.reason
        assert not path.exists()


async def test_its_own_directory_is_writable_and_starts_empty():
    use_dir = (
        CORRECT + "import os\n"
        "assert os.listdir('.') == [], os.listdir('.')\n"
        "open('scratch.txt', 'w').write('ok')\n"
        "assert open('scratch.txt').read() == 'ok'\n"
    )
    outcome = await score(use_dir)
    assert outcome.passed is True, outcome.reason


async def test_a_child_left_running_is_killed_with_the_sandbox():
    outcome = await score(LEAVE_A_CHILD, timeout_seconds=5)
    assert outcome.passed is True, outcome.reason
    assert sandbox_processes() == []


async def test_a_hostile_dataset_scores_nothing_and_leaves_nothing():
    hostile = [
        EXIT_EARLY,
        OS_EXIT_EARLY,
        EXIT_IN_CANDIDATE,
        REDEFINE_CHECK,
        FORGE_VERDICT,
        FORK_BOMB,
        ALLOCATE,
        LOOP,
        FLOOD,
        CORRECT.replace("a + b", "0") + "open('/usr/x', 'w')\n",
        CORRECT.replace("a + b", "0")
        + "import socket\nsocket.create_connection(('1.1.1.1', 53), 3)\n",
    ]
    outcomes = await asyncio.gather(
        *(
            score(
                completion,
                item(index=index),
                timeout_seconds=3,
                processes=16,
                memory_mb=256,
            )
            for index, completion in enumerate(hostile)
        )
    )
    assert [outcome.passed for outcome in outcomes] == [False] * len(hostile)
    assert all(outcome.reason for outcome in outcomes)
    assert sandbox_processes() == []
    assert work_directories() == []
    # The server is still healthy: the next program runs as usual.
    assert (await score(CORRECT)).passed is True


async def test_cancelling_the_scorer_kills_the_program():
    task = asyncio.create_task(score(LOOP, timeout_seconds=60))
    await asyncio.sleep(1)  # let it start; nothing is timed
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sandbox_processes() == []


async def test_a_cancel_during_the_clean_up_lets_it_finish(
    monkeypatch: pytest.MonkeyPatch,
):
    """A program that ended is being cleaned up (its tree killed) when its
    caller is cancelled: the clean-up still ends, then the cancel goes on."""
    cleaning = threading.Event()
    release: list[asyncio.Event] = []  # made on the programs' loop
    steps: list[str] = []
    kill_tree = sandbox._kill_tree

    async def slow_kill(*args: Any) -> None:
        release.append(asyncio.Event())
        cleaning.set()
        await release[0].wait()  # as a kill that waits for the uid's processes
        await kill_tree(*args)
        steps.append("tree killed")

    monkeypatch.setattr(sandbox, "_kill_tree", slow_kill)
    caller = asyncio.create_task(score(CORRECT))
    assert await asyncio.to_thread(cleaning.wait, 60), "the clean-up never began"
    caller.cancel()
    for _ in range(3):  # the caller hands its cancel to the programs' loop
        await asyncio.sleep(0)
    programs = sandbox._PROGRAMS.loop
    assert programs is not None
    # Queued after that cancel: the clean-up is cancelled while it waits.
    programs.call_soon_threadsafe(release[0].set)
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert steps == ["tree killed"]
    assert sandbox_processes() == []


async def test_the_nonce_is_not_on_stdin_the_command_line_or_the_environment():
    snoop = (
        CORRECT.replace("a + b", "0") + "import os, re, sys\n"
        "seen = sys.stdin.read() + open('/proc/self/cmdline').read()\n"
        "seen += str(dict(os.environ))\n"
        "for token in re.findall('[0-9a-f]{32}', seen):\n"
        "    for fd in range(3, 64):\n"
        "        try:\n"
        "            os.write(fd, token.encode())\n"
        "        except OSError:\n"
        "            pass\n"
        "os._exit(0)\n"
    )
    outcome = await score(snoop)
    assert outcome.passed is False
    assert "before its tests finished" in outcome.reason


async def test_replacing_assertion_error_in_builtins_does_not_hide_a_failure():
    patch = (
        "    return 0\n\n"
        "import builtins\n"
        "builtins.AssertionError = type('Quiet', (Exception,), {})\n"
    )
    outcome = await score(patch)
    assert outcome.passed is False
    assert "AssertionError" in outcome.reason


async def test_an_object_equal_to_everything_fails():
    cheat = (
        "    class Anything:\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "    return Anything()\n"
    )
    outcome = await score(cheat)
    assert outcome.passed is False
    assert "a Anything cannot be passed between the candidate and the tests" in (
        outcome.reason
    )


# Takes every 32-hex-digit value from the locals of every frame above it (the
# harness's: where the nonce and the verdict pipe were) and from every object
# the interpreter holds, writes each to every descriptor and to the
# descriptors of its parent, and exits 0.
NONCE_THIEF = (
    CORRECT.replace("a + b", "0") + "import gc, os, re, sys\n"
    "found = set()\n"
    "def look(value):\n"
    "    if isinstance(value, (bytes, str)) and len(value) == 32:\n"
    "        text = value if isinstance(value, str) else value.decode('latin-1')\n"
    "        if re.fullmatch('[0-9a-f]{32}', text):\n"
    "            found.add(text.encode())\n"
    "frame = sys._getframe()\n"
    "while frame is not None:\n"
    "    for value in list(frame.f_locals.values()):\n"
    "        look(value)\n"
    "    frame = frame.f_back\n"
    "for value in gc.get_objects():\n"
    "    look(value)\n"
    "    if isinstance(value, dict):\n"
    "        for inner in list(value.values()):\n"
    "            look(inner)\n"
    "fds = [str(fd) for fd in range(3, 64)]\n"
    "try:\n"
    "    fds += ['/proc/%d/fd/%s' % (os.getppid(), name)\n"
    "            for name in os.listdir('/proc/%d/fd' % os.getppid())]\n"
    "except OSError:\n"
    "    pass\n"
    "for token in found:\n"
    "    for fd in fds:\n"
    "        try:\n"
    "            if fd.isdigit():\n"
    "                os.write(int(fd), token)\n"
    "            else:\n"
    "                with open(fd, 'wb') as pipe:\n"
    "                    pipe.write(token)\n"
    "        except OSError:\n"
    "            pass\n"
    "os._exit(0)\n"
)


async def test_the_nonce_cannot_be_taken_from_the_harness():
    outcome = await score(NONCE_THIEF)
    assert outcome.passed is False
    assert "before its tests finished" in outcome.reason


async def test_the_parents_memory_cannot_be_read():
    peek = CORRECT + "import os\nopen('/proc/%d/mem' % os.getppid(), 'rb')\n"
    outcome = await score(peek)
    assert outcome.passed is False
    assert "PermissionError" in outcome.reason


async def test_an_honest_solution_passes_across_the_boundary():
    target = item(
        prompt="def shape(n):\n",
        test=(
            "def check(candidate):\n"
            "    value = candidate(3)\n"
            "    assert value == ([1, 2, 3], (1.5, None), {'k': {1, 2}}, b'x', 2**70)\n"
            "    assert type(value[1]) is tuple and type(value[2]['k']) is set\n"
            "    assert list(candidate(0)[0]) == []\n"
            "    try:\n"
            "        candidate(-1)\n"
            "    except ValueError as exc:\n"
            "        assert str(exc) == 'negative'\n"
            "    else:\n"
            "        raise AssertionError('no ValueError')\n"
            "    assert double(4) == 8\n"
        ),
        entry_point="shape",
    )
    completion = (
        "    if n < 0:\n"
        "        raise ValueError('negative')\n"
        "    return list(range(1, n + 1)), (1.5, None), {'k': {1, 2}}, b'x', 2**70\n"
        "\n"
        "def double(x):\n"
        "    return 2 * x\n"
    )
    outcome = await score(completion, target)
    assert outcome.passed is True, outcome.reason


async def test_dev_shm_is_bounded():
    fill = (
        CORRECT + "for n in range(8):\n"
        "    with open(f'/dev/shm/fill{n}', 'wb') as out:\n"
        "        out.write(b'x' * 4 * 1024 * 1024)\n"
    )
    outcome = await score(fill, file_size_mb=8)
    assert outcome.passed is False
    assert "No space left on device" in outcome.reason

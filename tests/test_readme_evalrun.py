"""Every `evalrun` and `evalcompare` command of the README runs, as written,
on a fresh install.

Each command starts from an empty data directory (no database yet), in a
directory holding the files the README names (``data.jsonl``,
``answers.jsonl``), with the local fake model server where the README's
address points. Optional parts are kept when they need nothing the README
asks to set up first (``[--json]``, ``[--cost-budget USD]``) and left out
otherwise (``[--api-key-secret NAME]`` needs a project secret, ``[--user
USERNAME]`` an account). A command on a run (``RUN_ID``) gets one made by
``evalrun`` first: a run its cost budget stopped for ``--resume``, a finished
run otherwise (the baseline of ``--baseline``, which the run of the demo
model over the same items ties with). ``evalcompare BASELINE CANDIDATE``
gets two such runs. Those runs are made once a module, each on a fresh install
of its own, and each test acting on them gets its own copy of that data
directory.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runs.testing.fake_openai import FakeOpenAIServer
from tests.processes import ROOT, env_for
from tests.test_readme_commands import COMMANDS

# Every program runs on the SQLite file of its data directory.
pytestmark = pytest.mark.own_sqlite

MANAGE = ".venv/bin/python manage.py"
PREFIX = MANAGE + " evalrun"
README_ENDPOINT = "http://127.0.0.1:8765/v1"
FILLED = {"USD": "5"}  # placeholders in optional parts the test can fill
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_]+\b")
EVALRUNS = [c for c in COMMANDS if c.startswith(PREFIX + " ")]
EVALCOMPARES = [c for c in COMMANDS if c.startswith(MANAGE + " evalcompare ")]


def as_written(
    command: str,
    *,
    run_id: int | None,
    base_url: str,
    runs: dict[str, int] | None = None,
) -> list[str]:
    def optional(match: re.Match[str]) -> str:
        part = match.group(1).split("|")[0]
        names = set(PLACEHOLDER.findall(part))
        if names - set(FILLED):
            return " "
        return " " + PLACEHOLDER.sub(lambda m: FILLED[m.group(0)], part) + " "

    text = re.sub(r"\[([^\[\]]*)\]", optional, command)
    words = shlex.split(text.removeprefix(MANAGE))
    runs = {"RUN_ID": run_id} if run_id is not None else (runs or {})
    words = [str(runs.get(word, word)) for word in words]
    words = [word.replace(README_ENDPOINT, base_url) for word in words]
    return [sys.executable, str(ROOT / "manage.py"), *words]


def evalrun(argv: list[str], cwd: Path, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env_for(data_dir),
        capture_output=True,
        text=True,
        timeout=900,
    )


def write_files(cwd: Path) -> None:
    with (cwd / "data.jsonl").open("w") as f:
        for i in range(6):
            f.write(json.dumps({"input": f"What is {i} + 1?", "expected": str(i + 1)}))
            f.write("\n")
    with (cwd / "answers.jsonl").open("w") as f:
        for i in range(3):  # a field of no other use goes to the metadata
            row = {"input": f"What is {i} + 1?", "expected": str(i + 1)}
            f.write(json.dumps(row | {"answer": str(i + 1)}) + "\n")


def run_for(command: str, cwd: Path, data_dir: Path) -> int | None:
    """The run a command on a run acts on, made by evalrun first."""
    if "RUN_ID" not in command:
        return None
    # The demo model's answers cost about $0.00002 each: a budget of less
    # than two stops a run of six items, one at a time, with items skipped.
    budget = ["--concurrency", "1", "--cost-budget", "0.00003"]
    done = evalrun(
        [
            *(sys.executable, str(ROOT / "manage.py"), "evalrun", "data.jsonl"),
            *("--target", "demo", "--scorer", "exact_match", "--json"),
            *(budget if "--resume" in command else []),
        ],
        cwd,
        data_dir,
    )
    summary = json.loads(done.stdout)
    assert summary["skipped"] == (4 if "--resume" in command else 0), done.stderr
    return summary["run_id"]


# An install, from fresh, with the runs that ``run_for`` made for these commands.
Installed = tuple[Path, list[int]]


@pytest.fixture(scope="module")
def installs(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[tuple[str, ...]], Installed]:
    """The data directory of a fresh install after ``run_for`` made a run for
    each of ``commands`` in turn, and the runs' ids: made once a module, the
    runs of all but the last command on a copy of the install made for them."""
    made: dict[tuple[str, ...], Installed] = {}

    def install(commands: tuple[str, ...]) -> Installed:
        if commands not in made:
            base = tmp_path_factory.mktemp("install")
            cwd, data_dir = base / "work", base / "data"
            cwd.mkdir()
            write_files(cwd)
            runs = copy_of(install(commands[:-1]), data_dir) if commands[:-1] else []
            run = run_for(commands[-1], cwd, data_dir)
            made[commands] = data_dir, [*runs, *([] if run is None else [run])]
        return made[commands]

    return install


def copy_of(installed: Installed, data_dir: Path) -> list[int]:
    """A data directory of the test's own, a copy of ``installed``'s."""
    shutil.copytree(installed[0], data_dir)
    return installed[1]


def made_for(
    command: str,
    installs: Callable[[tuple[str, ...]], Installed],
    data_dir: Path,
) -> int | None:
    """``run_for(command, ...)`` on a fresh install at ``data_dir``."""
    if "RUN_ID" not in command:
        return None
    shape = "RUN_ID --resume" if "--resume" in command else "RUN_ID"
    [run_id] = copy_of(installs((shape,)), data_dir)
    return run_id


def test_the_readme_shows_the_evalrun_commands() -> None:
    assert len(EVALRUNS) >= 6
    assert any("--resume" in c for c in EVALRUNS)
    assert any("--format humaneval" in c for c in EVALRUNS)
    assert any("--baseline RUN_ID" in c for c in EVALRUNS)
    assert EVALCOMPARES


@pytest.mark.parametrize("command", EVALRUNS)
def test_a_readme_evalrun_command_runs_as_written_on_a_fresh_install(
    command: str,
    tmp_path: Path,
    fake_openai: FakeOpenAIServer,
    installs: Callable[[tuple[str, ...]], Installed],
) -> None:
    cwd, data_dir = tmp_path / "work", tmp_path / "data"
    cwd.mkdir()
    write_files(cwd)
    run_id = made_for(command, installs, data_dir)

    done = evalrun(
        as_written(command, run_id=run_id, base_url=fake_openai.base_url),
        cwd,
        data_dir,
    )

    assert done.returncode == 0, f"{command}\n{done.stderr}"
    if run_id is None:  # the first command on this install: it set it up
        first, second = done.stderr.splitlines()[:2]
        assert "set up a new database" in first, done.stderr
        assert "local operator account 'operator'" in first
        assert second == "run 1 started"


def assert_gate_passed(
    command: str, done: subprocess.CompletedProcess, cwd: Path
) -> None:
    """A gate between two runs of the demo model over the same items: a tie."""
    assert done.returncode == 0, f"{command}\n{done.stderr}"
    if "--json" in command:
        gate = json.loads(done.stdout)["gate"]
        assert gate["verdicts"] == {"exact_match": "no_significant_difference"}
        assert gate["failed"] is False
    else:
        assert "gate passed (--fail-on worse)" in done.stdout + done.stderr
    if "gate.md" in command:
        assert "### evalsite gate: passed" in (cwd / "gate.md").read_text()
    if "gate.xml" in command:
        assert 'failures="0"' in (cwd / "gate.xml").read_text()


@pytest.mark.parametrize("command", [c for c in EVALRUNS if "--baseline" in c])
def test_a_readme_gate_passes_a_run_that_ties_with_its_baseline(
    command: str,
    tmp_path: Path,
    fake_openai: FakeOpenAIServer,
    installs: Callable[[tuple[str, ...]], Installed],
) -> None:
    cwd, data_dir = tmp_path / "work", tmp_path / "data"
    cwd.mkdir()
    write_files(cwd)
    run_id = made_for(command, installs, data_dir)

    done = evalrun(
        as_written(command, run_id=run_id, base_url=fake_openai.base_url),
        cwd,
        data_dir,
    )

    assert_gate_passed(command, done, cwd)


@pytest.mark.parametrize("command", EVALCOMPARES)
def test_a_readme_evalcompare_command_runs_as_written(
    command: str,
    tmp_path: Path,
    fake_openai: FakeOpenAIServer,
    installs: Callable[[tuple[str, ...]], Installed],
) -> None:
    cwd, data_dir = tmp_path / "work", tmp_path / "data"
    cwd.mkdir()
    write_files(cwd)
    baseline, candidate = copy_of(installs(("RUN_ID", "RUN_ID")), data_dir)

    done = evalrun(
        as_written(
            command,
            run_id=None,
            base_url=fake_openai.base_url,
            runs={"BASELINE": baseline, "CANDIDATE": candidate},
        ),
        cwd,
        data_dir,
    )

    assert_gate_passed(command, done, cwd)

"""Every command the README tells you to type runs as written.

Command lines are read from the README's code blocks and inline code; each is
parsed by the real parser of its command (management commands, the fake model
server, make targets), so a renamed option or a command that is not on PATH
shows up here.
"""

from __future__ import annotations

import inspect
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class
from django.core.management.base import CommandError

from runs.testing import fake_faults, fake_openai

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
# Tools that live in the virtualenv: written bare, they are not found unless it
# is activated, which the README does not assume.
VENV_TOOLS = ("python", "python3", "manage.py", "pip", "daphne", "pytest", "ruff")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _code_lines() -> list[str]:
    """Lines of indented and fenced code blocks, continuations joined."""
    lines: list[str] = []
    fenced = False
    pending = ""
    for raw in README.splitlines():
        if raw.startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or raw.startswith("    ")):
            continue
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        lines.append(line)
    return lines


def _inline_code() -> list[str]:
    prose = re.sub(r"^```.*?^```", "", README, flags=re.S | re.M)
    spans = (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose))
    return [span for span in spans if " " in span]  # a word alone names a thing


def _commands() -> list[str]:
    found = []
    for text in _code_lines() + _inline_code():
        text = text.split(" #", 1)[0].strip()
        first = text.split(" ", 1)[0]
        if first in ("make", "source") or first.startswith(".venv/bin/"):
            found.append(text)
        elif first in VENV_TOOLS:
            found.append(text)  # and test_commands_name_the_virtualenv refuses it
    return found


COMMANDS = list(dict.fromkeys(_commands()))


def _argv(command: str) -> list[str]:
    """The words of a documented command, optional parts included (the first
    of alternatives ``[a | b]``) and placeholders (RUN_ID, NAME, ...) replaced
    by a value every type accepts."""
    command = re.sub(r"\[([^\[\]|]*)\|[^\[\]]*\]", r"[\1]", command)
    words = shlex.split(command.replace("[", " ").replace("]", " "))
    return ["1" if PLACEHOLDER.match(word) else word for word in words]


def _manage_commands() -> list[str]:
    return [c for c in COMMANDS if c.startswith(".venv/bin/python manage.py ")]


def test_the_readme_documents_commands() -> None:
    assert len(_manage_commands()) >= 8
    assert any(c.startswith(".venv/bin/python -m runs.testing.") for c in COMMANDS)
    assert any(c.startswith("make run") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_commands_name_the_virtualenv(command: str) -> None:
    first = command.split(" ", 1)[0]
    assert first not in VENV_TOOLS, (
        f"{command!r} only works inside an activated virtualenv: "
        "write .venv/bin/" + first
    )


@pytest.mark.parametrize("command", _manage_commands())
def test_management_commands_parse_as_documented(command: str) -> None:
    argv = _argv(command)[2:]  # after ".venv/bin/python manage.py"
    name, args = argv[0], argv[1:]
    commands = get_commands()
    assert name in commands, f"no management command {name!r}"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    try:
        parser.parse_args(args)
    except CommandError as exc:
        pytest.fail(f"{command!r} does not parse: {exc}")


@pytest.mark.parametrize(
    "command",
    [c for c in COMMANDS if c.startswith(".venv/bin/python -m runs.testing.")],
)
def test_the_fake_server_command_parses_as_documented(command: str) -> None:
    argv = _argv(command)
    assert argv[2] == "runs.testing.fake_openai"
    fake_openai.build_parser().parse_args(argv[3:])


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith("make ")])
def test_make_targets_exist(command: str) -> None:
    done = subprocess.run(
        ["make", "-n", *_argv(command)[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_the_virtualenv_python_runs_a_documented_command() -> None:
    if not VENV_PYTHON.exists():
        pytest.skip("no .venv here (make install-test creates it)")
    assert (ROOT / ".venv" / "bin" / "activate").exists()
    for argv in (
        [".venv/bin/python", "manage.py", "seed_demo", "--help"],
        [".venv/bin/python", "-m", "runs.testing.fake_openai", "--help"],
    ):
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "usage:" in done.stdout


# -- the fake model server's --help ------------------------------------------------


def _fake_help() -> str:
    return fake_openai.build_parser().format_help()


def test_every_fake_server_option_is_explained() -> None:
    for action in fake_openai.build_parser()._actions:
        assert action.help, f"{action.option_strings} has no help"


def test_every_prompt_marker_the_fake_server_understands_is_explained() -> None:
    # The server's answer and the failures its markers ask for.
    source = inspect.getsource(fake_openai.FakeOpenAIServer.answer)
    source += inspect.getsource(fake_faults.marked_fault)
    understood = set(
        re.findall(r'markers(?:\.get\(|\[)"(\w+)"', source)
        + re.findall(r'"(\w+)" in markers', source)
    )
    assert {"latency", "hang", "status", "flaky"} <= understood  # the scan works

    text = _fake_help()

    for marker in sorted(understood):
        assert f"[[{marker}" in text, f"[[{marker}]] is not explained"


def test_the_fake_server_help_runs_without_django() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runs.testing.fake_openai", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "no.such.settings"},
    )

    assert done.returncode == 0, done.stderr
    assert "[[hang]]" in done.stdout

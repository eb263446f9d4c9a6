from __future__ import annotations

import ast
import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from runs.errors import ConfigError
from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.sandbox import Program, SandboxUnavailable, mode, run_program
from runs.sandbox.limits import SandboxLimits


class ProgramParams(Params):
    """Where an item keeps its tests, and what the program starts with."""

    test_field: str = Field(
        "test",
        min_length=1,
        title="Test field",
        description="Item metadata field holding the test code (defines check).",
    )
    entry_point_field: str = Field(
        "entry_point",
        min_length=1,
        title="Entry point field",
        description="Item metadata field naming the function check is called with.",
    )
    include_input: bool = Field(
        True,
        title="Prepend the input",
        description=(
            "Start the program with the item's input (HumanEval's prompt: the "
            "signature and docstring the completion continues)."
        ),
    )
    extract_code: Literal["auto", "fenced", "none"] = Field(
        "auto",
        title="Code in the output",
        description=(
            "auto: the first fenced block (```python, else a bare ```) when the "
            "output has one, else the whole output, as Inspect AI's HumanEval "
            "reads a chat model's answer; fenced: only a fenced block (an output "
            "without one fails); none: the output as it is. With auto and "
            "fenced, code that defines the entry point itself replaces the "
            "input's definition of it (the input's imports and helpers stay)."
        ),
    )


# Inspect AI's HumanEval (find_code): a ```python block first, else a bare one.
_FENCES = (
    re.compile(r"```(?:python3?|py)[ \t]*\r?\n(.*?)```", re.DOTALL),
    re.compile(r"```[ \t]*\r?\n(.*?)```", re.DOTALL),
)


def fenced_code(text: str) -> str | None:
    """The first fenced code block of ``text``, or None when it has none."""
    for fence in _FENCES:
        found = fence.search(text)
        if found:
            return found.group(1)
    return None


def defines(code: str, name: str) -> bool:
    """Whether ``code`` defines the function ``name`` at its top level."""
    pattern = rf"^(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\("
    return re.search(pattern, code, re.MULTILINE) is not None


def without_definition(source: str, name: str) -> str:
    """``source`` without its top-level definition of ``name`` (decorators too);
    unchanged when it does not parse or has none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            node.name == name
        ):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            end = node.end_lineno or node.lineno
            return "".join(lines[: first - 1] + lines[end:])
    return source


# The program's own parameters come first, then the sandbox's limits:
# pydantic lists the fields of the last base first.
class CodeExecParams(SandboxLimits, ProgramParams):
    pass


@register
class CodeExec(ScorerPlugin[CodeExecParams]):
    """Runs the completion against the item's tests in a sandbox (HumanEval's way).

    The program is the item's input (the prompt), the output (the completion),
    the test code from the item's metadata field ``test_field`` (default
    ``test``) and ``check(<entry point>)``, the function named by the metadata
    field ``entry_point_field`` (default ``entry_point``): the layout of the
    ``humaneval`` import format. A chat model's answer is read as Inspect AI's
    HumanEval reads it (``extract_code``): the code of its first fenced block,
    and a function it restates replaces the prompt's stub. It passes only when
    the tests run to their end and the program exits cleanly, within its
    limits: wall time, CPU seconds, memory, processes, file size, open files,
    output size. It runs in a sandbox (runs/sandbox/): the completion in a
    process of its own, the tests in another that calls it with plain data; no
    network, no server data. Where the sandbox cannot run, a run fails before
    its first item, saying how to enable it. The reason's first line names the
    kind of failure (an exception's type and where it was raised, a timeout, a
    limit, an exit status); the lines below show it.
    """

    kind: ClassVar[str] = "code_exec"
    label: ClassVar[str] = "Code execution (sandboxed tests)"
    example: ClassVar[dict[str, Any]] = {
        "test_field": "test",
        "entry_point_field": "entry_point",
        "extract_code": "auto",
        "timeout_seconds": 10,
        "memory_mb": 512,
    }
    needs_expected: ClassVar[bool] = False

    def __init__(self, name: str, params: CodeExecParams) -> None:
        super().__init__(name, params)
        self.limits = params.limits()

    async def prepare(self) -> None:
        """Refuse the run before any item when the sandbox cannot run here."""
        try:
            await mode()
        except SandboxUnavailable as exc:
            raise ConfigError(f"scorer {self.name!r}: {exc}") from None

    def program(self, *, output: Any, item: TargetInput) -> Program:
        """The program to run; ValueError naming a missing field."""
        metadata = item.metadata or {}
        test = metadata.get(self.params.test_field)
        entry_point = metadata.get(self.params.entry_point_field)
        for field, value in (
            (self.params.test_field, test),
            (self.params.entry_point_field, entry_point),
        ):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"the item's metadata has no {field!r} text")
        assert isinstance(test, str) and isinstance(entry_point, str)
        if not entry_point.strip().isidentifier():
            raise ValueError(f"entry point {entry_point!r} is not a Python name")
        name = entry_point.strip()
        prompt = as_text(item.input) if self.params.include_input else ""
        completion = as_text(output)
        if self.params.extract_code != "none":
            completion = fenced_code(completion) or (
                "" if self.params.extract_code == "fenced" else completion
            )
            if defines(completion, name):
                # A chat model restates the function: its definition is the
                # one tested, and the input's stub is not run before it.
                prompt = without_definition(prompt, name)
        candidate = "\n".join([prompt, completion]) + "\n"
        return Program(candidate=candidate, tests=test, entry_point=name)

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        if (
            self.params.extract_code == "fenced"
            and fenced_code(as_text(output)) is None
        ):
            return ScoreOutcome(0.0, False, "no fenced code block in the output")
        program = self.program(output=output, item=item)
        outcome = await run_program(program, self.limits)
        reason = outcome.describe()
        if outcome.passed:
            reason = f"check({program.entry_point}) passed"
        return ScoreOutcome(1.0 if outcome.passed else 0.0, outcome.passed, reason)

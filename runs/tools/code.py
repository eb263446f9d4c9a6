"""Runs the model's Python code in the ``code_exec`` sandbox (no network,
time, memory and process limits); what it printed is the result."""

from __future__ import annotations

from typing import Any, ClassVar

from runs.errors import ConfigError
from runs.plugins.tools import ToolError, ToolPlugin, register
from runs.sandbox import Program, SandboxUnavailable, mode, run_program
from runs.sandbox.limits import SandboxLimits

# The program's tests: nothing to check, the program's run is the call.
NO_TESTS = "def check(candidate):\n    pass\n"
# What the model is sent of the output, at most.
OUTPUT_CHARS = 8000
START_SECONDS = 5.0


class CodeToolParams(SandboxLimits):
    """The sandbox's limits; its wall-time limit is the call's timeout."""


@register
class CodeTool(ToolPlugin[CodeToolParams]):
    """Executes ``code`` (Python) in the sandbox; the result is its exit
    status and what it printed (standard output and error, the end kept)."""

    kind: ClassVar[str] = "code"
    label: ClassVar[str] = "Python code (sandboxed)"
    description: ClassVar[str] = (
        "Runs Python code in a sandbox without network; returns what it printed."
    )
    example: ClassVar[dict[str, Any]] = {"timeout_seconds": 10}
    arguments: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python code."}},
        "required": ["code"],
    }

    @property
    def timeout(self) -> float:
        # The sandbox kills the program at its wall-time limit; its start and
        # its end are given a few seconds more.
        return self.params.timeout_seconds + START_SECONDS

    async def prepare(self) -> None:
        try:
            await mode()
        except SandboxUnavailable as exc:
            raise ConfigError(f"tool {self.name!r}: {exc}") from None

    async def call(self, arguments: dict[str, Any]) -> Any:
        code = arguments.get("code")
        if not isinstance(code, str):
            raise ToolError(
                "the argument code must be a string", error_type="BadArguments"
            )
        program = Program(candidate=code + "\n", tests=NO_TESTS, entry_point="main")
        outcome = await run_program(program, self.params.limits())
        text = outcome.output.decode("utf-8", "replace")
        if len(text) > OUTPUT_CHARS:
            text = "…" + text[-OUTPUT_CHARS:]
        if outcome.timed_out or outcome.output_exceeded:
            raise ToolError(outcome.headline(), error_type="SandboxLimit")
        return {"exit_status": outcome.status(), "output": text}

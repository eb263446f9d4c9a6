from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from pydantic import Field, model_validator

from runs.errors import ConfigError
from runs.plugins import FieldError, Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.sandbox import Limits, Program, SandboxUnavailable, mode, run_program


class CodeExecParams(Params):
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
    timeout_seconds: float = Field(
        10.0,
        ge=0.1,
        le=300,
        allow_inf_nan=False,
        title="Wall-time limit (seconds)",
        description="The program and its processes are killed after this long.",
    )
    cpu_seconds: int = Field(
        10, ge=1, le=600, title="CPU limit (seconds)", description="CPU time."
    )
    memory_mb: int = Field(
        512,
        ge=64,
        le=16384,
        title="Memory limit (MB)",
        description="Address space of each of its processes.",
    )
    processes: int = Field(
        32,
        ge=1,
        le=1024,
        title="Process limit",
        description="Processes and threads it may start (running at once).",
    )
    file_size_mb: int = Field(
        10,
        ge=1,
        le=1024,
        title="File size limit (MB)",
        description="Largest file it may write.",
    )
    open_files: int = Field(
        64, ge=16, le=4096, title="Open files limit", description="Open files."
    )
    max_output_kb: int = Field(
        64,
        ge=1,
        le=10240,
        title="Output cap (KB)",
        description="A program that prints more is stopped and fails.",
    )

    @model_validator(mode="after")
    def _within_ceilings(self) -> CodeExecParams:
        """The operator's ceilings (settings), checked when a scorer is made."""
        for name, setting in CEILINGS.items():
            ceiling = getattr(settings, setting)
            if getattr(self, name) > ceiling:
                raise FieldError(
                    name, f"must be at most {ceiling} on this server ({setting})"
                )
        return self


# Each limit and the setting that caps it.
CEILINGS = {
    "timeout_seconds": "EVALSITE_SANDBOX_MAX_SECONDS",
    "cpu_seconds": "EVALSITE_SANDBOX_MAX_SECONDS",
    "memory_mb": "EVALSITE_SANDBOX_MAX_MEMORY_MB",
    "processes": "EVALSITE_SANDBOX_MAX_PROCESSES",
    "file_size_mb": "EVALSITE_SANDBOX_MAX_FILE_SIZE_MB",
    "open_files": "EVALSITE_SANDBOX_MAX_OPEN_FILES",
    "max_output_kb": "EVALSITE_SANDBOX_MAX_OUTPUT_KB",
}


@register
class CodeExec(ScorerPlugin[CodeExecParams]):
    """Runs the completion against the item's tests in a sandbox (HumanEval's way).

    The program is the item's input (the prompt), the output (the completion),
    the test code from the item's metadata field ``test_field`` (default
    ``test``) and ``check(<entry point>)``, the function named by the metadata
    field ``entry_point_field`` (default ``entry_point``): the layout of the
    ``humaneval`` import format. It passes only when the tests run to their end
    and the program exits cleanly, within its limits: wall time, CPU seconds,
    memory, processes, file size, open files, output size. It runs in a
    sandbox (runs/sandbox/): the completion in a process of its own, the
    tests in another that calls it with plain data; no network, no server
    data. Where the sandbox cannot run, a run fails before its first item,
    saying how to enable it. The reason names what happened: the failing assertion, a
    timeout, a limit, an exit status.
    """

    kind: ClassVar[str] = "code_exec"
    label: ClassVar[str] = "Code execution (sandboxed tests)"
    Params = CodeExecParams
    example: ClassVar[dict[str, Any]] = {
        "test_field": "test",
        "entry_point_field": "entry_point",
        "timeout_seconds": 10,
        "memory_mb": 512,
    }
    needs_expected: ClassVar[bool] = False

    def __init__(self, name: str, params: CodeExecParams) -> None:
        super().__init__(name, params)
        self.limits = Limits(
            wall_seconds=params.timeout_seconds,
            cpu_seconds=params.cpu_seconds,
            memory_mb=params.memory_mb,
            processes=params.processes,
            file_size_mb=params.file_size_mb,
            open_files=params.open_files,
            output_kb=params.max_output_kb,
        )

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
        prompt = as_text(item.input) if self.params.include_input else ""
        candidate = "\n".join([prompt, as_text(output)]) + "\n"
        return Program(candidate=candidate, tests=test, entry_point=entry_point.strip())

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        program = self.program(output=output, item=item)
        outcome = await run_program(program, self.limits)
        reason = outcome.describe()
        if outcome.passed:
            reason = f"check({program.entry_point}) passed"
        return ScoreOutcome(1.0 if outcome.passed else 0.0, outcome.passed, reason)

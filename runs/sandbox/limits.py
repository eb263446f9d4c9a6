"""The sandbox's limits as a plug-in's parameters.

A plug-in that runs programs (``code_exec``) declares them with
``SandboxLimits``: one parameter per limit, with its bounds and help, marked
with the limit it sets (``Sets``). Each is held to the operator's ceiling
(``outcome.CEILINGS``) when the plug-in is made, and ``limits()`` is what the
program runs under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field, model_validator

from runs.plugins import FieldError, Params
from runs.sandbox.outcome import CEILINGS, Limits, ceiling


@dataclass(frozen=True, slots=True)
class Sets:
    """In a parameter's ``Annotated`` metadata: the limit (a field of
    ``Limits``) that the parameter sets."""

    limit: str


# The parameters' defaults: the limits a program runs under unless told.
DEFAULTS = Limits()


class SandboxLimits(Params):
    """The limits a program runs under, one parameter each."""

    timeout_seconds: Annotated[float, Sets("wall_seconds")] = Field(
        DEFAULTS.wall_seconds,
        ge=0.1,
        le=300,
        allow_inf_nan=False,
        title="Wall-time limit (seconds)",
        description="The program and its processes are killed after this long.",
    )
    cpu_seconds: Annotated[int, Sets("cpu_seconds")] = Field(
        DEFAULTS.cpu_seconds,
        ge=1,
        le=600,
        title="CPU limit (seconds)",
        description="CPU time.",
    )
    memory_mb: Annotated[int, Sets("memory_mb")] = Field(
        DEFAULTS.memory_mb,
        ge=64,
        le=16384,
        title="Memory limit (MB)",
        description="Address space of each of its processes.",
    )
    processes: Annotated[int, Sets("processes")] = Field(
        DEFAULTS.processes,
        ge=1,
        le=1024,
        title="Process limit",
        description="Processes and threads it may start (running at once).",
    )
    file_size_mb: Annotated[int, Sets("file_size_mb")] = Field(
        DEFAULTS.file_size_mb,
        ge=1,
        le=1024,
        title="File size limit (MB)",
        description="Largest file it may write.",
    )
    open_files: Annotated[int, Sets("open_files")] = Field(
        DEFAULTS.open_files,
        ge=16,
        le=4096,
        title="Open files limit",
        description="Open files.",
    )
    max_output_kb: Annotated[int, Sets("output_kb")] = Field(
        DEFAULTS.output_kb,
        ge=1,
        le=10240,
        title="Output cap (KB)",
        description="A program that prints more is stopped and fails.",
    )

    @model_validator(mode="after")
    def _within_ceilings(self) -> SandboxLimits:
        """The operator's ceilings (settings), checked when the plug-in is made."""
        for name, limit in limit_params(type(self)).items():
            top = ceiling(limit)
            if getattr(self, name) > top:
                raise FieldError(
                    name, f"must be at most {top} on this server ({CEILINGS[limit]})"
                )
        return self

    def limits(self) -> Limits:
        """The limits these parameters set."""
        given = limit_params(type(self))
        return Limits(**{limit: getattr(self, name) for name, limit in given.items()})


def limit_params(model: type[BaseModel]) -> dict[str, str]:
    """The parameters of ``model`` that set a limit, and the limit each sets."""
    return {
        name: meta.limit
        for name, info in model.model_fields.items()
        for meta in info.metadata
        if isinstance(meta, Sets)
    }

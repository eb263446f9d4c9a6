"""A Python callable from the allowlist in settings, sync or async."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from pydantic import Field

from runs.models import ErrorKind
from runs.plugins import Params, TargetContext, allowlisted, load_callable
from runs.plugins.params import call_sync_or_async
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    register,
)


class PythonParams(Params):
    callable: Annotated[str, allowlisted("EVALSITE_PYTHON_TARGETS")] = Field(
        description=(
            "Dotted path of a function listed in EVALSITE_PYTHON_TARGETS; it "
            "gets the item and returns the output (sync or async)."
        ),
    )


@register
class PythonTarget(TargetPlugin[PythonParams]):
    """Calls ``fn(item)`` where ``item`` is a TargetInput; returns its value as
    output. A sync callable runs in a worker thread (``call_sync_or_async``)."""

    kind: ClassVar[str] = "python"
    label: ClassVar[str] = "Python callable (allowlisted)"
    description: ClassVar[str] = (
        "Calls an allowlisted Python function with the item; its return value "
        "is the output."
    )
    example: ClassVar[dict[str, Any]] = {"callable": "runs.targets.examples.echo"}

    def __init__(self, fn: Callable[[TargetInput], Any]) -> None:
        self.fn = fn

    @classmethod
    def from_config(
        cls, config: dict[str, Any], context: TargetContext | None = None
    ) -> PythonTarget:
        return cls(load_callable(cls.parse(config).callable))

    async def generate(self, item: TargetInput) -> TargetOutput:
        try:
            value = await call_sync_or_async(self.fn, item)
        except TargetError:
            raise
        except Exception as exc:  # a callable's own bug: permanent, recorded
            raise TargetError(
                f"{type(exc).__name__}: {exc}",
                kind=ErrorKind.PERMANENT,
                error_type=type(exc).__name__,
            ) from exc
        if isinstance(value, TargetOutput):
            return value
        return TargetOutput(output=value)

"""A Python callable from the allowlist in settings, sync or async."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from django.utils.module_loading import import_string
from pydantic import Field, field_validator

from runs.errors import ConfigError
from runs.models import ErrorKind
from runs.plugins import Params, TargetContext, allowlisted_callable
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    register,
)


class PythonParams(Params):
    callable: str = Field(
        title="Callable",
        description=(
            "Dotted path of a function listed in EVALSITE_PYTHON_TARGETS; it "
            "gets the item and returns the output (sync or async)."
        ),
    )

    @field_validator("callable")
    @classmethod
    def _allowlisted(cls, path: str) -> str:
        return allowlisted_callable(path, "EVALSITE_PYTHON_TARGETS")


@register
class PythonTarget(TargetPlugin):
    """Calls ``fn(item)`` where ``item`` is a TargetInput; returns its value as output.

    A sync callable runs in a worker thread; on timeout the executor stops
    waiting for it, but Python cannot stop the thread itself.
    """

    kind: ClassVar[str] = "python"
    label: ClassVar[str] = "Python callable (allowlisted)"
    description: ClassVar[str] = (
        "Calls an allowlisted Python function with the item; its return value "
        "is the output."
    )
    Params = PythonParams
    example: ClassVar[dict[str, Any]] = {"callable": "runs.targets.examples.echo"}

    def __init__(self, fn: Callable[[TargetInput], Any]) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)

    @classmethod
    def from_config(
        cls, config: dict[str, Any], context: TargetContext | None = None
    ) -> PythonTarget:
        path = cls.parse(config).callable
        try:
            fn = import_string(path)
        except ImportError as exc:
            raise ConfigError(
                f"cannot import {path!r}: {exc}", field="callable"
            ) from exc
        if not callable(fn):
            raise ConfigError(f"{path!r} is not callable", field="callable")
        return cls(fn)

    async def generate(self, item: TargetInput) -> TargetOutput:
        try:
            if self.is_async:
                value = await self.fn(item)
            else:
                value = await asyncio.to_thread(self.fn, item)
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

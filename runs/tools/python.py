"""A Python callable from the allowlist in settings, as a tool, sync or async."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from runs.plugins import allowlisted, load_callable
from runs.plugins.params import call_sync_or_async
from runs.plugins.tools import ToolError, ToolParams, ToolPlugin, register


class PythonToolParams(ToolParams):
    callable: Annotated[str, allowlisted("EVALSITE_PYTHON_TOOLS")] = Field(
        description=(
            "Dotted path of a function listed in EVALSITE_PYTHON_TOOLS; it gets "
            "the model's arguments as keyword arguments and returns the result "
            "(JSON; sync or async)."
        ),
    )
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="The arguments the model gives, as JSON Schema.",
    )


@register
class PythonTool(ToolPlugin[PythonToolParams]):
    """Calls ``fn(**arguments)``; its return value is the result. A sync
    callable runs in a worker thread (``call_sync_or_async``)."""

    kind: ClassVar[str] = "python"
    label: ClassVar[str] = "Python callable (allowlisted)"
    description: ClassVar[str] = (
        "Calls an allowlisted Python function with the model's arguments."
    )
    example: ClassVar[dict[str, Any]] = {
        "callable": "runs.tools.examples.add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    }

    def __init__(
        self, name: str, description: str, params: PythonToolParams, secret: Any = None
    ) -> None:
        super().__init__(name, description, params, secret)
        self.fn = load_callable(params.callable)

    def arguments_schema(self) -> dict[str, Any]:
        return self.params.parameters

    async def call(self, arguments: dict[str, Any]) -> Any:
        try:
            return await call_sync_or_async(self.fn, **arguments)
        except ToolError:
            raise
        except TypeError as exc:  # arguments the function does not take
            raise ToolError(f"TypeError: {exc}", error_type="BadArguments") from exc
        except Exception as exc:  # the callable's own error: the model is told
            raise ToolError(
                f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__
            ) from exc

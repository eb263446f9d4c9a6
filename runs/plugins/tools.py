"""The tool protocol: what an agent (the ``agent`` target) may call.

A tool kind is declared like a target or a scorer kind: one file under
``runs/tools/``, one ``Params`` (with a per-call timeout), an example, the
secret it sends (if any), and one async method, ``call``, that turns the
model's arguments into a result or raises ``ToolError``. An agent's
configuration lists its tools by kind, name and parameters; each tool's
``schema`` is what the model is told it may call (an OpenAI ``tools`` entry).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import Field

from runs.errors import ConfigError
from runs.plugins.declaration import Plugin, SecretRef, TargetContext
from runs.plugins.params import Params
from runs.plugins.registry import Registry

__all__ = [
    "TOOLS",
    "ToolError",
    "ToolParams",
    "ToolPlugin",
    "build_tool",
    "get_tool_class",
    "register",
]

# What OpenAI accepts as a function's name.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
ToolTimeout = Annotated[
    float,
    Field(
        gt=0,
        le=3600,
        title="Timeout (seconds)",
        description="Longest one call of the tool may take; then it ends with an "
        "error the model is told.",
    ),
]


class ToolError(Exception):
    """A tool call that failed: the model is told ``message`` and may go on."""

    def __init__(self, message: str, *, error_type: str = "ToolError") -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type


class ToolParams(Params):
    """What every tool kind's parameters hold: its per-call timeout."""

    timeout_seconds: ToolTimeout = 30.0


class ToolPlugin[P: Params](Plugin):
    """A tool kind's declaration and its one method, ``call``.

    Built with its name (the function the model calls), the description the
    model reads, its validated ``Params`` and, when it declares a secret, the
    value of it (``secret``).
    """

    Params: ClassVar[type[Params]] = ToolParams
    # The arguments the model gives, as JSON Schema (a kind that takes them
    # from its parameters overrides ``arguments_schema``).
    arguments: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    # A call of it ends the agent's loop, its argument the answer.
    final: ClassVar[bool] = False

    def __init__(
        self, name: str, description: str, params: P, secret: str | None = None
    ) -> None:
        self.name = name
        self.about = description or self.summary()
        self.params = params
        self.secret = secret

    @property
    def timeout(self) -> float:
        return float(getattr(self.params, "timeout_seconds", 30.0))

    def arguments_schema(self) -> dict[str, Any]:
        return self.arguments

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry the model is sent."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.about,
                "parameters": self.arguments_schema(),
            },
        }

    async def call(self, arguments: dict[str, Any]) -> Any:
        """The result the model is sent back (JSON), or ToolError."""
        raise NotImplementedError

    async def prepare(self) -> None:
        """ConfigError when it cannot work in this process, before any item."""

    async def aclose(self) -> None:
        """Release what it holds once the run has ended."""

    @classmethod
    def secret_ref(cls) -> SecretRef | None:
        return cls.secrets[0] if cls.secrets else None


TOOLS: Registry[type[ToolPlugin[Any]]] = Registry(
    "tool", ToolPlugin, "call", noun="tool kind"
)
register = TOOLS.register


def get_tool_class(kind: object, *, field: str = "kind") -> type[ToolPlugin[Any]]:
    return TOOLS.lookup(kind, field=field)


def build_tool(
    spec: dict[str, Any], *, context: TargetContext | None = None, key: str = ""
) -> ToolPlugin[Any]:
    """A tool from a cleaned spec (kind, name, description, params); its
    secret, if it declares one, is ``context.secrets[key]``. Without a
    context (what the model would be sent, shown), it is built without it."""
    cls = get_tool_class(spec["kind"])
    secret = (context.secrets.get(key) if context else None) or None
    named = _names_secret(cls, spec["params"])
    if context is not None and cls.secrets and secret is None and named:
        raise ConfigError(
            "the secret was not resolved for this project", field=key or "tools"
        )
    return cls(
        spec["name"], spec.get("description", ""), cls.parse(spec["params"]), secret
    )


def _names_secret(cls: type[ToolPlugin[Any]], params: dict[str, Any]) -> bool:
    ref = cls.secret_ref()
    if ref is None:
        return False
    return bool(
        params.get(ref.secret_field) or (ref.env_field and params.get(ref.env_field))
    )

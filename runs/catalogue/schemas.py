"""The catalogue's API schemas: plug-in kinds and their parameters."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema

from runs.plugins import json_schema
from runs.plugins.scorers import SCORERS
from runs.plugins.targets import TARGETS


class PluginKindOut(Schema):
    kind: str
    label: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema of the parameters")
    example: dict[str, Any]
    secrets: list[str] = Field(
        description="parameters that name a secret (never hold one)"
    )


class ScorerKindOut(PluginKindOut):
    needs_expected: bool = Field(
        description="whether the scorer compares with the item's expected answer"
    )
    needs_steps: bool = Field(
        False, description="whether the scorer reads the result's trajectory (steps)"
    )


class ToolKindOut(PluginKindOut):
    arguments: dict[str, Any] = Field(
        description="JSON Schema of the arguments the model gives, unless the "
        "tool's parameters declare them (parameters.parameters)"
    )
    final: bool = Field(description="whether a call of it ends the agent's loop")


def kinds_schema(registry: str) -> Any:
    def extra(schema: dict[str, Any]) -> None:
        plugins = TARGETS if registry == "targets" else SCORERS
        schema["x-parameters-by-kind"] = {
            kind: json_schema(cls.Params) for kind, cls in sorted(plugins.items())
        }

    return extra

"""The catalogue's endpoints: the scorer and tool kinds and their parameters."""

from __future__ import annotations

from typing import Any

from ninja import Router

from runs.catalogue.kinds import scorer_kinds, tool_kinds
from runs.catalogue.schemas import ScorerKindOut, ToolKindOut
from runs.web.api import READ_ERRORS
from runs.web.requests import ApiRequest

scorer_router = Router(tags=["scorers"])
tool_router = Router(tags=["tools"])


@scorer_router.get("", response={200: list[ScorerKindOut], **READ_ERRORS})
def list_scorers(request: ApiRequest) -> list[dict[str, Any]]:
    """Every scorer kind: parameters as JSON Schema, an example, whether it
    needs an expected answer."""
    return scorer_kinds()


@tool_router.get("", response={200: list[ToolKindOut], **READ_ERRORS})
def list_tools(request: ApiRequest) -> list[dict[str, Any]]:
    """Every tool kind an agent target may list: parameters as JSON Schema,
    an example, the arguments the model gives, whether it ends the loop."""
    return tool_kinds()

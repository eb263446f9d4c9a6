"""The catalogue's endpoint: the scorer kinds and their parameters."""

from __future__ import annotations

from typing import Any

from ninja import Router

from runs.catalogue.kinds import scorer_kinds
from runs.catalogue.schemas import ScorerKindOut
from runs.web.api import READ_ERRORS
from runs.web.requests import ApiRequest

scorer_router = Router(tags=["scorers"])


@scorer_router.get("", response={200: list[ScorerKindOut], **READ_ERRORS})
def list_scorers(request: ApiRequest) -> list[dict[str, Any]]:
    """Every scorer kind: parameters as JSON Schema, an example, whether it
    needs an expected answer."""
    return scorer_kinds()

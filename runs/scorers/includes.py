from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from runs.scorers.base import ScoreOutcome, ScorerPlugin, as_text, register
from runs.scorers.text import NormaliseParams, normalise
from runs.targets.base import TargetInput


class IncludesParams(NormaliseParams):
    ignore_case: bool = Field(True, description="Compare case-insensitively.")


@register
class Includes(ScorerPlugin):
    """The expected value (or any of a list of them) appears in the output."""

    kind: ClassVar[str] = "includes"
    label: ClassVar[str] = "Output includes expected"
    Params = IncludesParams
    example: ClassVar[dict[str, Any]] = {"ignore_case": True, "strip": True}

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        text = normalise(as_text(output), self.params)
        candidates = (
            item.expected if isinstance(item.expected, list) else [item.expected]
        )
        for candidate in candidates:
            needle = normalise(as_text(candidate), self.params)
            if needle and needle in text:
                return ScoreOutcome(
                    1.0, True, f"output includes {as_text(candidate)!r}"
                )
        return ScoreOutcome(
            0.0, False, f"output does not include {as_text(item.expected)!r}"
        )

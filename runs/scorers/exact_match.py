from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from runs.scorers.base import ScoreOutcome, ScorerPlugin, as_text, register
from runs.scorers.text import NormaliseParams, normalise
from runs.targets.base import TargetInput


class ExactMatchParams(NormaliseParams):
    strip: bool = Field(True, description="Ignore whitespace at the start and the end.")


@register
class ExactMatch(ScorerPlugin):
    """Output equals the expected value (or one of a list) after normalisation."""

    kind: ClassVar[str] = "exact_match"
    label: ClassVar[str] = "Exact match"
    Params = ExactMatchParams
    example: ClassVar[dict[str, Any]] = {"strip": True, "ignore_case": True}

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        got = normalise(as_text(output), self.params)
        candidates = (
            item.expected if isinstance(item.expected, list) else [item.expected]
        )
        for candidate in candidates:
            if got == normalise(as_text(candidate), self.params):
                return ScoreOutcome(1.0, True, f"matches {as_text(candidate)!r}")
        return ScoreOutcome(
            0.0, False, f"{got[:200]!r} is not {as_text(item.expected)[:200]!r}"
        )

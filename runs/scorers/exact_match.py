from __future__ import annotations

from typing import Any, ClassVar

from runs.scorers.base import ScoreOutcome, as_text, register
from runs.scorers.text import clean_normalise, normalise
from runs.targets.base import TargetInput


@register
class ExactMatch:
    """Output equals the expected value after optional normalisation."""

    kind: ClassVar[str] = "exact_match"
    label: ClassVar[str] = "Exact match"

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    @classmethod
    def clean_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        return clean_normalise(params, defaults={"strip": True})

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

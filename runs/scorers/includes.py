from __future__ import annotations

from typing import Any, ClassVar

from runs.scorers.base import ScoreOutcome, as_text, register
from runs.scorers.text import clean_normalise, normalise
from runs.targets.base import TargetInput


@register
class Includes:
    """The expected value (or any of a list of them) appears in the output."""

    kind: ClassVar[str] = "includes"
    label: ClassVar[str] = "Output includes expected"

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    @classmethod
    def clean_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        return clean_normalise(params, defaults={"ignore_case": True})

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

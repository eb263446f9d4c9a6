from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from runs.plugins import Params
from runs.scorers.base import ScoreOutcome, ScorerPlugin, as_text, register
from runs.targets.base import TargetInput


class RegexParams(Params):
    pattern: str = Field(
        "",
        title="Pattern",
        description="Regular expression the output must match.",
    )
    mode: Literal["search", "fullmatch"] = Field(
        "search",
        description="search: anywhere in the output; fullmatch: the whole output.",
    )
    ignore_case: bool = Field(False, description="Match case-insensitively.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression: {exc}") from None
        return pattern


@register
class Regex(ScorerPlugin):
    """The output matches ``pattern`` from params, else the expected value."""

    kind: ClassVar[str] = "regex"
    label: ClassVar[str] = "Regular expression"
    description: ClassVar[str] = (
        "The output matches the pattern (anywhere, or whole with fullmatch). "
        "Without a pattern, the expected answer is the pattern, and the dataset "
        "must have one."
    )
    Params = RegexParams
    example: ClassVar[dict[str, Any]] = {
        "pattern": r"\b42\b",
        "mode": "search",
        "ignore_case": False,
    }
    needs_expected: ClassVar[bool] = False

    @classmethod
    def requires_expected(cls, params: dict[str, Any]) -> bool:
        return not params.get("pattern")

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params
        flags = re.IGNORECASE if params["ignore_case"] else 0
        self.pattern = (
            re.compile(params["pattern"], flags) if params["pattern"] else None
        )
        self.flags = flags

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        pattern = self.pattern or re.compile(as_text(item.expected), self.flags)
        text = as_text(output)
        match = (
            pattern.fullmatch(text)
            if self.params["mode"] == "fullmatch"
            else pattern.search(text)
        )
        if match:
            return ScoreOutcome(1.0, True, f"matched {match.group(0)[:200]!r}")
        return ScoreOutcome(0.0, False, f"no match for /{pattern.pattern}/")

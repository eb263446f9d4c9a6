from __future__ import annotations

import re
from typing import Any, ClassVar

from runs.scorers.base import ScoreOutcome, as_text, register
from runs.targets.base import ConfigError, TargetInput


@register
class Regex:
    """The output matches ``pattern`` from params, else the expected value."""

    kind: ClassVar[str] = "regex"
    label: ClassVar[str] = "Regular expression"

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params
        flags = re.IGNORECASE if params["ignore_case"] else 0
        self.pattern = (
            re.compile(params["pattern"], flags) if params["pattern"] else None
        )
        self.flags = flags

    @classmethod
    def clean_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        pattern = params.get("pattern") or ""
        if not isinstance(pattern, str):
            raise ConfigError("pattern", "must be a string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(
                "pattern", f"is not a valid regular expression: {exc}"
            ) from None
        mode = params.get("mode", "search")
        if mode not in ("search", "fullmatch"):
            raise ConfigError("mode", "must be search or fullmatch")
        ignore_case = params.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            raise ConfigError("ignore_case", "must be true or false")
        return {"pattern": pattern, "mode": mode, "ignore_case": ignore_case}

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

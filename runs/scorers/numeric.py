from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from runs.scorers.base import ScoreOutcome, as_text, register
from runs.targets.base import ConfigError, TargetInput

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def extract_number(value: Any, *, which: str) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    matches = _NUMBER.findall(as_text(value))
    if not matches:
        return None
    token = matches[-1] if which == "last" else matches[0]
    try:
        return float(token.replace(",", ""))
    except ValueError:
        return None


@register
class Numeric:
    """The number in the output is within a tolerance of the expected number."""

    kind: ClassVar[str] = "numeric"
    label: ClassVar[str] = "Numeric (tolerance)"

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    @classmethod
    def clean_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        cleaned: dict[str, Any] = {}
        for key, default in (("abs_tol", 1e-6), ("rel_tol", 0.0)):
            raw = params.get(key, default)
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ConfigError(key, f"must be a number, not {raw!r}") from None
            if value < 0 or math.isnan(value):
                raise ConfigError(key, "must not be negative")
            cleaned[key] = value
        which = params.get("extract", "last")
        if which not in ("first", "last"):
            raise ConfigError("extract", "must be first or last")
        cleaned["extract"] = which
        return cleaned

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        expected = extract_number(item.expected, which="first")
        if expected is None:
            raise ValueError(f"expected value {as_text(item.expected)!r} has no number")
        got = extract_number(output, which=self.params["extract"])
        if got is None:
            return ScoreOutcome(0.0, False, "output has no number")
        ok = math.isclose(
            got,
            expected,
            rel_tol=self.params["rel_tol"],
            abs_tol=self.params["abs_tol"],
        )
        relation = "within" if ok else "outside"
        return ScoreOutcome(
            1.0 if ok else 0.0, ok, f"{got:g} vs {expected:g}: {relation} tolerance"
        )

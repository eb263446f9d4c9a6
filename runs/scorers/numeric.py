from __future__ import annotations

import math
import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from runs.plugins import Params
from runs.scorers.base import ScoreOutcome, ScorerPlugin, as_text, register
from runs.targets.base import TargetInput

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


class NumericParams(Params):
    abs_tol: float = Field(
        1e-6,
        ge=0,
        allow_inf_nan=False,
        title="Absolute tolerance",
        description="Largest difference that still counts as equal.",
    )
    rel_tol: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        title="Relative tolerance",
        description="Largest difference as a fraction of the larger number.",
    )
    extract: Literal["first", "last"] = Field(
        "last", description="Which number of the output is compared."
    )


@register
class Numeric(ScorerPlugin):
    """The number in the output is within a tolerance of the expected number."""

    kind: ClassVar[str] = "numeric"
    label: ClassVar[str] = "Numeric (tolerance)"
    Params = NumericParams
    example: ClassVar[dict[str, Any]] = {
        "abs_tol": 0.01,
        "rel_tol": 0.0,
        "extract": "last",
    }

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

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

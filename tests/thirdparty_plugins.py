"""A plug-in package as a third party would write it, for tests/test_plugins.py.

The module registers a target with @register; ``Shouting`` is left for the
setting to register by its dotted path.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from runs.plugins import Params, Plugin
from runs.scorers.base import ScoreOutcome, ScorerPlugin, as_text
from runs.targets.base import TargetInput, TargetOutput, register


class ParrotParams(Params):
    prefix: str = Field("", description="Put before every answer.")
    repeat: int = Field(1, ge=1, le=5, description="Times the input is repeated.")


@register
class Parrot(Plugin):
    """Answers with the input, repeated."""

    kind: ClassVar[str] = "parrot"
    label: ClassVar[str] = "Parrot"
    Params = ParrotParams
    example: ClassVar[dict[str, Any]] = {"prefix": "> ", "repeat": 2}

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Parrot:
        return cls(cls.clean(config))

    async def generate(self, item: TargetInput) -> TargetOutput:
        text = " ".join([str(item.input)] * self.config["repeat"])
        return TargetOutput(output=self.config["prefix"] + text)

    async def aclose(self) -> None:
        return None


class ShoutingParams(Params):
    min_ratio: float = Field(
        0.5, ge=0, le=1, description="Share of letters that must be capitals."
    )


class Shouting(ScorerPlugin):
    """Most of the output's letters are capitals."""

    kind: ClassVar[str] = "shouting"
    label: ClassVar[str] = "Shouting"
    Params = ShoutingParams
    example: ClassVar[dict[str, Any]] = {"min_ratio": 0.8}
    needs_expected: ClassVar[bool] = False

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        letters = [c for c in as_text(output) if c.isalpha()]
        ratio = sum(c.isupper() for c in letters) / len(letters) if letters else 0.0
        passed = ratio >= self.params["min_ratio"]
        return ScoreOutcome(ratio, passed, f"{ratio:.0%} capitals")

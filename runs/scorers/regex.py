from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.scorers.patterns import EXPECTED, compile_user_pattern, with_expected
from runs.scorers.text import expected_answers


class RegexParams(Params):
    pattern: str = Field(
        title="Pattern",
        description=(
            "Regular expression (RE2 syntax) the output must match. {expected} "
            "stands for the item's expected answer, matched literally and whole."
        ),
    )
    mode: Literal["search", "fullmatch"] = Field(
        "search",
        description="search: anywhere in the output; fullmatch: the whole output.",
    )
    ignore_case: bool = Field(False, description="Match case-insensitively.")

    @field_validator("pattern", mode="before")
    @classmethod
    def _compiles(cls, pattern: Any) -> Any:
        compile_user_pattern(pattern)  # ValueError naming what is wrong
        return pattern


@register
class Regex(ScorerPlugin[RegexParams]):
    """Passes when the output matches ``pattern`` (RE2 syntax, required).

    ``mode`` ``search`` (default): the pattern matches somewhere in the output;
    ``fullmatch``: it matches the whole output. ``{expected}`` in the pattern
    stands for the item's expected answer (any of a list), matched literally
    (escaped) and whole: ``answer: {expected}`` passes ``answer: 42`` for 42 but
    not ``answer: 421``. The engine runs in time linear in the output, so it has
    no backreferences or lookarounds, and ``$`` is the end of the output.
    """

    kind: ClassVar[str] = "regex"
    label: ClassVar[str] = "Regular expression"
    example: ClassVar[dict[str, Any]] = {
        "pattern": r"answer:\s*{expected}",
        "mode": "search",
        "ignore_case": False,
    }
    needs_expected: ClassVar[bool] = False

    @classmethod
    def requires_expected(cls, params: dict[str, Any]) -> bool:
        return EXPECTED in params.get("pattern", "")

    def __init__(self, name: str, params: RegexParams) -> None:
        super().__init__(name, params)
        self.uses_expected = EXPECTED in params.pattern
        self.pattern = compile_user_pattern(
            params.pattern, ignore_case=params.ignore_case
        )

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        pattern = self.pattern
        shown = f"/{self.params.pattern}/"
        if self.uses_expected:
            answers = expected_answers(item)
            pattern = with_expected(
                self.params.pattern, answers, ignore_case=self.params.ignore_case
            )
            shown = f"{shown} with {{expected}} = {' or '.join(map(repr, answers))}"
        text = as_text(output)
        match = (
            pattern.fullmatch(text)
            if self.params.mode == "fullmatch"
            else pattern.search(text)
        )
        if match:
            return ScoreOutcome(1.0, True, f"matched {match.group(0)[:200]!r}")
        return ScoreOutcome(0.0, False, f"no match for {shown[:400]}")

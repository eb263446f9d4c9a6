from __future__ import annotations

from typing import Any, ClassVar

from runs.scorers.base import ScoreOutcome, as_text, register
from runs.scorers.patterns import EXPECTED, compile_user_pattern, with_expected
from runs.scorers.text import expected_answers
from runs.targets.base import ConfigError, TargetInput


@register
class Regex:
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

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params
        self.uses_expected = EXPECTED in params["pattern"]
        self.pattern = compile_user_pattern(
            params["pattern"], ignore_case=params["ignore_case"]
        )

    @classmethod
    def clean_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        pattern = params.get("pattern")
        compile_user_pattern(pattern)
        mode = params.get("mode", "search")
        if mode not in ("search", "fullmatch"):
            raise ConfigError("mode", "must be search or fullmatch")
        ignore_case = params.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            raise ConfigError("ignore_case", "must be true or false")
        return {"pattern": pattern, "mode": mode, "ignore_case": ignore_case}

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        pattern = self.pattern
        shown = f"/{self.params['pattern']}/"
        if self.uses_expected:
            answers = expected_answers(item)
            pattern = with_expected(
                self.params["pattern"], answers, ignore_case=self.params["ignore_case"]
            )
            shown = f"{shown} with {{expected}} = {' or '.join(map(repr, answers))}"
        text = as_text(output)
        match = (
            pattern.fullmatch(text)
            if self.params["mode"] == "fullmatch"
            else pattern.search(text)
        )
        if match:
            return ScoreOutcome(1.0, True, f"matched {match.group(0)[:200]!r}")
        return ScoreOutcome(0.0, False, f"no match for {shown[:400]}")

from __future__ import annotations

from typing import Any, ClassVar

from runs.scorers.base import ScoreOutcome, as_text, register
from runs.scorers.text import clean_normalise, expected_answers, normalise
from runs.targets.base import TargetInput


@register
class ExactMatch:
    """Passes when the whole output equals the expected answer (or one of a list).

    By default only leading and trailing whitespace is ignored (``strip``); case,
    inner whitespace and punctuation count unless ``ignore_case``,
    ``collapse_whitespace`` or ``ignore_punctuation`` is set. Both sides are
    Unicode-normalised (NFC). An item without an expected answer is a scorer
    error, never a pass for an empty output.
    """

    kind: ClassVar[str] = "exact_match"
    label: ClassVar[str] = "Exact match"

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    @classmethod
    def clean_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        return clean_normalise(params, defaults={"strip": True})

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        answers = expected_answers(item)
        got = normalise(as_text(output), self.params)
        for answer in answers:
            if got == normalise(answer, self.params):
                return ScoreOutcome(1.0, True, f"matches {answer[:200]!r}")
        return ScoreOutcome(
            0.0,
            False,
            f"{got[:200]!r} is not {' or '.join(repr(a[:200]) for a in answers)}",
        )

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from runs.plugins.scorers import ScoreOutcome, register
from runs.plugins.targets import TargetInput
from runs.scorers.text import AnswerScorer, NormaliseParams, normalise


class ExactMatchParams(NormaliseParams):
    strip: bool = Field(True, description="Ignore whitespace at the start and the end.")


@register
class ExactMatch(AnswerScorer[ExactMatchParams]):
    """Passes when the whole output equals the expected answer (or one of a list).

    By default only leading and trailing whitespace is ignored (``strip``); case,
    inner whitespace and punctuation count unless ``ignore_case``,
    ``collapse_whitespace`` or ``ignore_punctuation`` is set. Both sides are
    Unicode-normalised (NFC). An item without an expected answer is a scorer
    error, never a pass for an empty output.
    """

    kind: ClassVar[str] = "exact_match"
    label: ClassVar[str] = "Exact match"
    example: ClassVar[dict[str, Any]] = {"strip": True, "ignore_case": True}

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        answers, got = self.answers(output, item)
        for answer in answers:
            if got == normalise(answer, self.params):
                return ScoreOutcome(1.0, True, f"matches {answer[:200]!r}")
        return ScoreOutcome(
            0.0,
            False,
            f"{got[:200]!r} is not {' or '.join(repr(a[:200]) for a in answers)}",
        )

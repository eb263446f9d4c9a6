from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from runs.plugins.scorers import ScoreOutcome, register
from runs.plugins.targets import TargetInput
from runs.scorers.patterns import contains_whole
from runs.scorers.text import AnswerScorer, NormaliseParams, normalise


class IncludesParams(NormaliseParams):
    ignore_case: bool = Field(True, description="Compare case-insensitively.")
    whole_words: bool = Field(
        True,
        description=(
            "Find the answer only as a whole word or number (42 is not in 421); "
            "false accepts any substring."
        ),
    )


@register
class Includes(AnswerScorer[IncludesParams]):
    """Passes when the expected answer (or one of a list) appears in the output.

    The answer is looked for literally and, by default, whole (``whole_words``):
    not as part of a longer word or number, so ``42`` is not found in ``421`` nor
    ``cat`` in ``concat``; ``whole_words: false`` accepts any substring. Case is
    ignored by default (``ignore_case``); ``strip``, ``collapse_whitespace`` and
    ``ignore_punctuation`` apply to both sides. An empty or missing expected
    answer is a scorer error.
    """

    kind: ClassVar[str] = "includes"
    label: ClassVar[str] = "Output includes expected"
    example: ClassVar[dict[str, Any]] = {"ignore_case": True, "strip": True}

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        answers, text = self.answers(output, item)
        whole = self.params.whole_words
        needles = [(a, normalise(a, self.params)) for a in answers]
        needles = [(answer, needle) for answer, needle in needles if needle]
        if not needles:
            raise ValueError("the expected answer is empty: there is nothing to find")
        for answer, needle in needles:
            if contains_whole(text, needle) if whole else needle in text:
                how = "as a whole word" if whole else "as a substring"
                return ScoreOutcome(
                    1.0, True, f"output includes {answer[:200]!r} {how}"
                )
        shown = " or ".join(repr(a[:200]) for a in answers)
        return ScoreOutcome(0.0, False, f"output does not include {shown}")

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field

from runs.plugins import Params, UnitThreshold
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.scorers.text import expected_answers

# partial_ratio slides the shorter text along the longer one: its work grows
# with the square of the shorter text (two texts of 2,000 characters take
# seconds, of 10,000 minutes), so the shorter one is bounded much tighter.
PARTIAL_MAX_SHORTER = 1_000


class SimilarityParams(Params):
    method: Literal["ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio"] = (
        Field(
            "ratio",
            description=(
                "rapidfuzz's measure: ratio (whole texts), partial_ratio (the "
                "best-matching part of the longer text), token_sort_ratio (words "
                "in any order), token_set_ratio (shared words, repeats ignored)."
            ),
        )
    )
    threshold: UnitThreshold = Field(
        0.8, description="Passes when the similarity is at least this (0 to 1)."
    )
    preprocess: bool = Field(
        True,
        description=(
            "Lower-case both texts, turn every character that is not a letter or "
            "a digit into a space and trim them (rapidfuzz's default_process)."
        ),
    )
    max_length: int = Field(
        10_000,
        ge=1,
        le=100_000,
        description=(
            "Longest text compared, in characters; a longer output fails "
            "without being compared (the work grows with the product of the "
            "two lengths)."
        ),
    )


@register
class Similarity(ScorerPlugin[SimilarityParams]):
    """Fuzzy similarity of the output to the expected answer, with rapidfuzz.

    The value is rapidfuzz's ``method`` score scaled to 0..1 (``ratio`` by
    default: 1 - normalised Indel distance); with a list of expected answers,
    the best of them. Passes when the value is at least ``threshold`` (0.8).
    ``preprocess`` (default on) ignores case and punctuation. Texts longer
    than ``max_length`` characters fail without being compared, and so do,
    for ``partial_ratio``, pairs whose shorter text exceeds 1,000 characters.
    """

    kind: ClassVar[str] = "similarity"
    label: ClassVar[str] = "Fuzzy similarity (rapidfuzz)"
    example: ClassVar[dict[str, Any]] = {"method": "token_sort_ratio", "threshold": 0.9}

    def __init__(self, name: str, params: SimilarityParams) -> None:
        super().__init__(name, params)
        # Imported when a scorer of this kind is made, not when the registry
        # loads every kind (as each command's start does).
        from rapidfuzz import fuzz, utils

        self.measure: Callable[..., float] = getattr(fuzz, params.method)
        self.processor = utils.default_process if params.preprocess else None

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        answers = expected_answers(item)
        text = as_text(output)
        method, threshold = self.params.method, self.params.threshold
        limit = self.params.max_length
        if len(text) > limit:
            return ScoreOutcome(
                0.0,
                False,
                f"the output has {len(text):,} characters; {method} compares at "
                f"most {limit:,} (max_length)",
            )
        processor = self.processor
        best, best_answer, refused = -1.0, "", ""
        for answer in answers:
            if why := self._too_long(text, answer):
                refused = why
                continue
            value = self.measure(text, answer, processor=processor) / 100
            if value > best:
                best, best_answer = value, answer
        if best < 0:
            return ScoreOutcome(0.0, False, refused)
        passed = best >= threshold
        relation = "at least" if passed else "below"
        return ScoreOutcome(
            best,
            passed,
            f"{method} {best:.3f} ({relation} {threshold:g}) against "
            f"{best_answer[:200]!r}",
        )

    def _too_long(self, text: str, answer: str) -> str:
        limit = self.params.max_length
        if len(answer) > limit:
            return (
                f"the expected answer has {len(answer):,} characters; "
                f"{self.params.method} compares at most {limit:,} (max_length)"
            )
        shorter = min(len(text), len(answer))
        if self.params.method == "partial_ratio" and shorter > PARTIAL_MAX_SHORTER:
            return (
                f"partial_ratio compares a shorter text of at most "
                f"{PARTIAL_MAX_SHORTER:,} characters, and both have more "
                f"({shorter:,}); use ratio or token_set_ratio"
            )
        return ""

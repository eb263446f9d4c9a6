from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import Field

from runs.plugins import Params, UnitThreshold
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.scorers.text import SLICE, expected_answers, slices

# SQuAD's official normalisation (evaluate-v2.0.py): lower case, drop ASCII
# punctuation, drop the articles a, an and the, split on whitespace.
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPACE = re.compile(r"\s")


def _pieces(text: str, size: int = SLICE) -> Iterator[str]:
    """``text`` in pieces of about ``size`` characters, each cut at whitespace.

    Every step of the normalisation works within a run of non-whitespace, so
    normalising the pieces one by one gives SQuAD's tokens exactly, while each
    C call stays short (other threads run between them).
    """
    return slices(text, size, _SPACE)


def tokens(text: str) -> Counter[str]:
    """SQuAD's normalised tokens of ``text``, counted."""
    counts: Counter[str] = Counter()
    for piece in _pieces(text):
        piece = piece.lower().translate(_PUNCTUATION)
        counts.update(_ARTICLES.sub(" ", piece).split())
    return counts


def f1(predicted: Counter[str], gold: Counter[str]) -> tuple[float, float, float]:
    """F1, precision and recall of token counts, as SQuAD computes them.

    An empty side scores 1 when both are empty (a correct "no answer"), else 0.
    """
    if not predicted or not gold:
        same = float(not predicted and not gold)
        return same, same, same
    common = sum((predicted & gold).values())
    if not common:
        return 0.0, 0.0, 0.0
    precision = common / predicted.total()
    recall = common / gold.total()
    return 2 * precision * recall / (precision + recall), precision, recall


class F1Params(Params):
    threshold: UnitThreshold = Field(
        0.5, description="Passes when the F1 is at least this (0 to 1)."
    )


@register
class TokenF1(ScorerPlugin[F1Params]):
    """Token F1 between the output and the expected answer, as SQuAD scores it.

    Both sides are normalised the SQuAD way: lower case, ASCII punctuation
    removed, the articles a, an and the removed, split on whitespace. The
    value is the F1 of the two bags of tokens (the harmonic mean of precision
    and recall); with a list of expected answers, the best of them. Passes when
    the F1 is at least ``threshold`` (default 0.5). An empty expected answer
    matches only an empty output (SQuAD's "no answer").
    """

    kind: ClassVar[str] = "f1"
    label: ClassVar[str] = "Token F1 (SQuAD)"
    example: ClassVar[dict[str, Any]] = {"threshold": 0.5}

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        answers = expected_answers(item)
        predicted = tokens(as_text(output))
        best = (-1.0, 0.0, 0.0, "")
        for answer in answers:
            value, precision, recall = f1(predicted, tokens(answer))
            if value > best[0]:
                best = (value, precision, recall, answer)
        value, precision, recall, answer = best
        passed = value >= self.params.threshold
        relation = "at least" if passed else "below"
        return ScoreOutcome(
            value,
            passed,
            f"F1 {value:.3f} ({relation} {self.params.threshold:g}) against "
            f"{answer[:200]!r}: precision {precision:.3f}, recall {recall:.3f} "
            f"over {predicted.total():,} output tokens",
        )

"""Normalisation and expected answers, shared by the text scorers.

Scorers run in worker threads; a single C call over a huge output (one
``re.sub`` over 10 MB holds the GIL for most of a second) would still stall the
event loop. So normalisation works through the text in slices of about
``SLICE`` characters, letting other threads run between them.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import Field

from runs.plugins import Params
from runs.plugins.scorers import INLINE_CHARS, ScorerPlugin, as_text
from runs.plugins.targets import TargetInput

SLICE = 1 << 16
_PUNCTUATION = str.maketrans("", "", string.punctuation)
# A slice may end before a character that is ASCII and not whitespace: no
# whitespace run and no Unicode composition (NFC) crosses such a boundary.
_BOUNDARY = re.compile(r"[\x21-\x7e]")


class NormaliseParams(Params):
    """How output and expected answer are normalised before they are compared."""

    ignore_case: bool = Field(False, description="Compare case-insensitively.")
    strip: bool = Field(
        False, description="Ignore whitespace at the start and the end."
    )
    collapse_whitespace: bool = Field(
        False, description="Treat every run of whitespace as one space."
    )
    ignore_punctuation: bool = Field(
        False, description="Remove ASCII punctuation before comparing."
    )


NORMALISE_OPTIONS = tuple(NormaliseParams.model_fields)


def slices(
    text: str, size: int | None = None, boundary: re.Pattern[str] = _BOUNDARY
) -> Iterator[str]:
    """``text`` in pieces of about ``size`` characters, each cut before the
    next match of ``boundary`` (by default, where nothing spans)."""
    size = size or SLICE
    start = 0
    while start < len(text):
        end = start + size
        if end < len(text):
            found = boundary.search(text, end)
            end = found.start() if found else len(text)
        yield text[start:end]
        start = end


def _normalise_slice(text: str, options: NormaliseParams) -> str:
    text = unicodedata.normalize("NFC", text)
    if options.ignore_punctuation:
        text = text.translate(_PUNCTUATION)
    if options.collapse_whitespace:
        text = collapse_whitespace(text)
    if options.ignore_case:
        text = text.casefold()
    return text


def collapse_whitespace(text: str) -> str:
    """Each run of whitespace as one space (``str.split``, thrice ``re.sub``'s pace)."""
    words = " ".join(text.split())
    if not words:
        return " " if text else ""
    lead = " " if text[0].isspace() else ""
    trail = " " if text[-1].isspace() else ""
    return f"{lead}{words}{trail}"


def normalise(text: str, options: NormaliseParams) -> str:
    """NFC, then as asked: drop punctuation, collapse whitespace, strip, fold case."""
    if len(text) <= SLICE:
        text = _normalise_slice(text, options)
    else:
        text = "".join(_normalise_slice(piece, options) for piece in slices(text))
        if options.collapse_whitespace and options.ignore_punctuation:
            # Punctuation dropped at a cut can bring two collapsed runs together.
            text = "".join(collapse_whitespace(piece) for piece in slices(text))
    if options.strip:
        text = text.strip()
    return text


def expected_answers(item: TargetInput) -> list[str]:
    """The item's expected answer, or each of a list of them, as text.

    An item without one is an error of the item, not a silent pass or fail.
    """
    values = item.expected if isinstance(item.expected, list) else [item.expected]
    answers = [as_text(value) for value in values if value is not None]
    if not answers:
        raise ValueError("the item has no expected answer")
    return answers


class AnswerScorer[P: NormaliseParams](ScorerPlugin[P]):
    """A scorer that compares the output with the expected answers, both
    normalised alike (``NormaliseParams``): a few linear passes, so short
    texts are scored on the loop."""

    inline_chars: ClassVar[int] = INLINE_CHARS

    def answers(self, output: Any, item: TargetInput) -> tuple[list[str], str]:
        """The expected answers, and the output's text normalised."""
        return expected_answers(item), normalise(as_text(output), self.params)

"""Normalisation shared by the text scorers."""

from __future__ import annotations

import re
import string
import unicodedata

from pydantic import Field

from runs.plugins import Params

_PUNCTUATION = str.maketrans("", "", string.punctuation)


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


def normalise(text: str, options: dict[str, bool]) -> str:
    text = unicodedata.normalize("NFC", text)
    if options.get("ignore_punctuation"):
        text = text.translate(_PUNCTUATION)
    if options.get("collapse_whitespace"):
        text = re.sub(r"\s+", " ", text)
    if options.get("strip"):
        text = text.strip()
    if options.get("ignore_case"):
        text = text.casefold()
    return text

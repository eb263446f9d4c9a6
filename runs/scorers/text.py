"""Normalisation shared by the text scorers."""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Any

from runs.targets.base import ConfigError

NORMALISE_OPTIONS = (
    "ignore_case",
    "strip",
    "collapse_whitespace",
    "ignore_punctuation",
)
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def clean_normalise(
    params: dict[str, Any], *, defaults: dict[str, bool]
) -> dict[str, bool]:
    cleaned: dict[str, bool] = {}
    for option in NORMALISE_OPTIONS:
        value = params.get(option, defaults.get(option, False))
        if not isinstance(value, bool):
            raise ConfigError(option, f"must be true or false, not {value!r}")
        cleaned[option] = value
    unknown = set(params) - set(NORMALISE_OPTIONS)
    if unknown:
        raise ConfigError(sorted(unknown)[0], "is not an option of this scorer")
    return cleaned


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

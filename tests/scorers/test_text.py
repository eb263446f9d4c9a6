"""Huge outputs are worked in slices; the result is as if worked whole."""

from __future__ import annotations

import itertools
import random
import re
import string
import unicodedata

import pytest

from runs.scorers import numeric, text
from runs.scorers.text import NORMALISE_OPTIONS, NormaliseParams, normalise, slices

# Characters that make slicing hard: whitespace runs, punctuation beside them,
# combining marks that NFC composes with the letter before, digits and signs.
ALPHABET = "ab \t\n  ,.;!-+e1234\u00a0\u0301\u0327éß" + string.punctuation[:6]


def whole(value: str, options: dict[str, bool]) -> str:
    """Normalisation in one pass over the whole text, the reference."""
    value = unicodedata.normalize("NFC", value)
    if options.get("ignore_punctuation"):
        value = value.translate(str.maketrans("", "", string.punctuation))
    if options.get("collapse_whitespace"):
        value = re.sub(r"\s+", " ", value)
    if options.get("strip"):
        value = value.strip()
    if options.get("ignore_case"):
        value = value.casefold()
    return value


def random_texts(count: int, seed: int) -> list[str]:
    generator = random.Random(seed)
    return [
        "".join(generator.choices(ALPHABET, k=generator.randint(0, 120)))
        for _ in range(count)
    ]


@pytest.mark.parametrize(
    "flags", list(itertools.product([False, True], repeat=len(NORMALISE_OPTIONS)))
)
def test_sliced_normalisation_equals_normalising_the_whole(monkeypatch, flags):
    options = dict(zip(NORMALISE_OPTIONS, flags, strict=True))
    monkeypatch.setattr(text, "SLICE", 7)
    for value in random_texts(300, seed=sum(flags) * 31 + len(flags)):
        params = NormaliseParams(**options)
        assert normalise(value, params) == whole(value, options), repr(value)


def test_slices_cover_the_text_and_are_bounded_where_they_can_be():
    value = "word, " * 1000 + "é" * 50
    pieces = list(slices(value, 16))
    assert "".join(pieces) == value
    assert max(len(piece) for piece in pieces[:-1]) <= 17


def test_the_last_number_found_in_slices_is_the_last_of_the_whole(monkeypatch):
    pattern = numeric._NUMBER
    for value in random_texts(2000, seed=7):
        found = pattern.findall(value)
        assert numeric._last_number(value, 5) == (found[-1] if found else None), repr(
            value
        )

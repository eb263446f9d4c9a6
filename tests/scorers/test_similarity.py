"""Fuzzy similarity with rapidfuzz, its work bounded on huge texts."""

from __future__ import annotations

import pytest

from runs.errors import ConfigError
from runs.scorers import clean_scorer_specs
from tests.scorers.scoring import HUGE, score


async def test_ratio_is_scaled_to_one_and_ignores_case_and_punctuation() -> None:
    outcome = await score("similarity", "Hello World!", "hello world")

    assert (outcome.value, outcome.passed) == (1.0, True)
    assert outcome.reason.startswith("ratio 1.000 (at least 0.8)")


async def test_a_near_miss_passes_above_the_threshold_only() -> None:
    close = await score("similarity", "Pariss", "Paris", threshold=0.9)
    strict = await score("similarity", "Pariss", "Paris", threshold=0.95)

    assert close.value == pytest.approx(10 / 11)
    assert (close.passed, strict.passed) == (True, False)


@pytest.mark.parametrize(
    ("method", "output", "expected"),
    [
        ("token_sort_ratio", "new york mets", "mets new york"),
        ("token_set_ratio", "the new york mets vs the atlanta braves", "new york mets"),
        ("partial_ratio", "the answer: new york mets.", "new york mets"),
    ],
)
async def test_each_method_forgives_what_it_should(
    method: str, output: str, expected: str
) -> None:
    assert (await score("similarity", output, expected)).passed is False
    outcome = await score("similarity", output, expected, method=method)
    assert (outcome.value, outcome.passed) == (1.0, True)


async def test_without_preprocessing_case_counts() -> None:
    outcome = await score("similarity", "PARIS", "paris", preprocess=False)

    assert outcome.value == 0.0


async def test_unicode_is_compared_by_character() -> None:
    outcome = await score("similarity", "Zoë Ünal", "zoe unal", threshold=0.7)

    assert outcome.value == pytest.approx(0.75)
    assert outcome.passed is True


@pytest.mark.parametrize("output", ["", None, "   "])
async def test_an_empty_output_is_not_similar(output: str | None) -> None:
    outcome = await score("similarity", output, "Paris")

    assert (outcome.value, outcome.passed) == (0.0, False)


async def test_a_huge_output_fails_without_being_compared() -> None:
    outcome = await score("similarity", "x" * HUGE, "Paris")

    assert outcome.passed is False
    assert "5,242,880 characters" in outcome.reason
    assert "max_length" in outcome.reason


async def test_partial_ratio_refuses_two_long_texts() -> None:
    outcome = await score(
        "similarity", "ab " * 1000, "ba " * 1000, method="partial_ratio"
    )

    assert outcome.passed is False
    assert "use ratio or token_set_ratio" in outcome.reason


def test_an_unknown_method_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "similarity", "params": {"method": "jaro"}}])

    assert caught.value.field == "scorers[0].params.method"

from __future__ import annotations

import pytest

from runs.errors import ConfigError
from runs.scorers import build_scorer, clean_scorer_specs
from runs.targets import TargetInput


def item(expected: object) -> TargetInput:
    return TargetInput(index=0, external_id="x", input="q", expected=expected)


async def score(kind: str, output: object, expected: object, **params: object):
    spec = clean_scorer_specs([{"kind": kind, "params": params}])[0]
    return await build_scorer(spec).score(output=output, item=item(expected))


async def test_exact_match_strips_by_default():
    assert (await score("exact_match", " Paris\n", "Paris")).passed is True


async def test_exact_match_is_case_sensitive_unless_told():
    assert (await score("exact_match", "paris", "Paris")).passed is False
    assert (
        await score("exact_match", "paris", "Paris", ignore_case=True)
    ).passed is True


async def test_exact_match_can_ignore_punctuation_and_whitespace():
    outcome = await score(
        "exact_match",
        "Hello,   world!",
        "hello world",
        ignore_case=True,
        ignore_punctuation=True,
        collapse_whitespace=True,
    )
    assert outcome.value == 1.0


async def test_exact_match_accepts_any_of_a_list_of_answers():
    assert (await score("exact_match", "NYC", ["New York", "NYC"])).passed is True


async def test_includes_finds_the_expected_text_ignoring_case():
    assert (await score("includes", "The answer is PARIS.", "paris")).passed is True
    assert (await score("includes", "The answer is Rome.", "paris")).passed is False


async def test_regex_uses_its_pattern_or_the_expected_value():
    assert (await score("regex", "answer: 42", None, pattern=r"\d+")).passed is True
    assert (await score("regex", "answer: 42", r"answer: \d+")).passed is True
    assert (
        await score("regex", "answer: 42", None, pattern=r"\d+", mode="fullmatch")
    ).passed is False


async def test_numeric_compares_the_last_number_within_tolerance():
    assert (
        await score("numeric", "so it is 3.1416", "3.14159", abs_tol=0.001)
    ).passed is True
    assert (await score("numeric", "1,234 apples", "1234")).passed is True
    assert (await score("numeric", "about 10", "12", rel_tol=0.1)).passed is False


async def test_numeric_without_a_number_in_the_output_fails():
    outcome = await score("numeric", "no idea", "7")
    assert (outcome.value, outcome.passed, outcome.reason) == (
        0.0,
        False,
        "output has no number",
    )


async def test_numeric_without_a_number_in_expected_is_a_scorer_error():
    with pytest.raises(ValueError, match="has no number"):
        await score("numeric", "7", "seven")


def test_unknown_scorer_is_refused_naming_its_position():
    unknown = r"'scorers\[1\]\.kind': unknown scorer 'bleu'"
    with pytest.raises(ConfigError, match=unknown):
        clean_scorer_specs(["exact_match", "bleu"])


def test_scorer_names_must_be_unique():
    with pytest.raises(ConfigError, match="used twice"):
        clean_scorer_specs(["exact_match", {"kind": "exact_match"}])


def test_bad_regex_pattern_is_refused():
    with pytest.raises(ConfigError, match=r"params\.pattern"):
        clean_scorer_specs([{"kind": "regex", "params": {"pattern": "("}}])

from __future__ import annotations

import pytest

from runs.errors import ConfigError
from runs.plugins.scoring import ScorerCall
from runs.scorers import build_scorer, clean_scorer_specs
from runs.targets import TargetInput


def item(expected: object) -> TargetInput:
    return TargetInput(index=0, external_id="x", input="q", expected=expected)


async def score(kind: str, output: object, expected: object, **params: object):
    """Scores as the executor does: through a worker, off the event loop."""
    spec = clean_scorer_specs([{"kind": kind, "params": params}])[0]
    return await ScorerCall(build_scorer(spec), output, item(expected)).run()


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


async def test_regex_matches_its_pattern_anywhere_or_whole():
    assert (await score("regex", "answer: 42", None, pattern=r"\d+")).passed is True
    assert (
        await score("regex", "answer: 42", None, pattern=r"\d+", mode="fullmatch")
    ).passed is False


def test_regex_without_a_pattern_is_refused_naming_the_field():
    # It used to search for the expected answer as a pattern: 421 passed for 42.
    with pytest.raises(
        ConfigError, match=r"scorers\[0\]\.params\.pattern'?: is required"
    ):
        clean_scorer_specs(["regex"])


async def test_regex_expected_placeholder_is_literal_and_whole():
    pattern = {"pattern": "answer: {expected}"}
    assert (await score("regex", "answer: 421", "42", **pattern)).passed is False
    assert (await score("regex", "answer: 42.", "42", **pattern)).passed is True
    # The answer is escaped: its dot is a dot, not any character.
    assert (await score("regex", "answer: 3x5", "3.5", **pattern)).passed is False
    assert (await score("regex", "answer: -3.5", "-3.5", **pattern)).passed is True
    assert (await score("regex", "answer: b", ["a", "b"], **pattern)).passed is True


async def test_regex_placeholder_without_an_expected_answer_is_a_scorer_error():
    with pytest.raises(ValueError, match="no expected answer"):
        await score("regex", "anything", None, pattern="{expected}")


async def test_includes_matches_whole_words_by_default():
    assert (await score("includes", "the answer is 421", "42")).passed is False
    assert (await score("includes", "concatenate", "cat")).passed is False
    assert (await score("includes", "it is 42, surely", "42")).passed is True
    substring = await score("includes", "the answer is 421", "42", whole_words=False)
    assert substring.passed is True


async def test_includes_without_an_expected_answer_is_a_scorer_error():
    with pytest.raises(ValueError, match="no expected answer"):
        await score("includes", "anything", None)


async def test_exact_match_without_an_expected_answer_is_a_scorer_error():
    # An empty output used to "equal" a missing answer and pass.
    with pytest.raises(ValueError, match="no expected answer"):
        await score("exact_match", "", None)


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


async def test_numeric_reason_says_which_number_it_took():
    outcome = await score("numeric", "42 is wrong, 421", "42")
    assert (outcome.passed, outcome.reason) == (
        False,
        "last number 421 vs 42: outside tolerance",
    )
    assert (await score("numeric", "42 is wrong, 421", "42", extract="first")).passed


async def test_numeric_only_fails_an_output_with_several_numbers():
    outcome = await score("numeric", "2 + 40 = 42", "42", extract="only")
    assert (outcome.passed, outcome.reason) == (
        False,
        "output has more than one number",
    )
    assert (await score("numeric", "It is 42.", "42", extract="only")).passed is True


async def test_numeric_expected_answer_must_hold_one_number():
    # "3/4" used to be read as 3, silently.
    with pytest.raises(ValueError, match="more than one number"):
        await score("numeric", "3", "3/4")


async def test_numeric_commas_separate_thousands_only_in_groups_of_three():
    assert (await score("numeric", "1,234,567", "1234567")).passed is True
    # "1,2" is two numbers, never twelve.
    assert (await score("numeric", "1,2", "12")).passed is False

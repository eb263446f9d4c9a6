"""The choice scorer reads the letter a reply picks, and never passes a hedge."""

from __future__ import annotations

import pytest

from runs.errors import ConfigError
from runs.scorers import clean_scorer_specs
from tests.scorers.scoring import HUGE, score


@pytest.mark.parametrize(
    "reply",
    [
        "The answer is (B).",
        "B) Paris is the capital.",
        "**B**",
        "Answer: b",
        "b",
        "  \n(B)\n",
        "I think the answer is a bit subtle, but the final answer is B.",
        "After weighing A and C, the correct option is B",
        "\uff22",  # a full-width B
        "Answer:\n\n**B**",
        "$\\boxed{B}$",
        "A good question. I would pick B",
    ],
)
async def test_choice_reads_the_letter_of_a_reply(reply: str) -> None:
    outcome = await score("choice", reply, "B")

    assert (outcome.value, outcome.passed) == (1.0, True), outcome.reason


async def test_the_last_statement_wins_and_the_reason_says_so() -> None:
    outcome = await score(
        "choice", "So the answer is A. Wait, no: the answer is (C).", "C"
    )

    assert outcome.passed is True
    assert "the last of several; also A" in outcome.reason


@pytest.mark.parametrize(
    "reply",
    [
        "A or B",
        "The answer is A or B.",
        "Either (A) or (B)",
        "**A** **B**",
        "It could be A, it could be B",
    ],
)
async def test_a_reply_naming_two_letters_is_ambiguous_and_fails(reply: str) -> None:
    outcome = await score("choice", reply, "B")

    assert outcome.passed is False
    assert "ambiguous" in outcome.reason


@pytest.mark.parametrize("reply", ["", "   \n\t", None, "I do not know.", "E"])
async def test_a_reply_without_a_letter_fails_saying_so(reply: str | None) -> None:
    outcome = await score("choice", reply, "B")

    assert outcome.passed is False
    assert outcome.reason.startswith("no choice letter (A, B, C, D)")


async def test_a_wrong_letter_fails_naming_both() -> None:
    outcome = await score("choice", "The answer is (A).", "B")

    assert outcome.passed is False
    assert outcome.reason.startswith("answered A (stated as 'answer is (A)')")
    assert outcome.reason.endswith("expected B")


async def test_letters_param_widens_the_choices() -> None:
    assert (await score("choice", "E", "E", letters="abcde")).passed is True
    with pytest.raises(ValueError, match="'E' is not a letter of ABCD"):
        await score("choice", "E", "E")


async def test_expected_may_be_an_option_text_or_an_index() -> None:
    options = {"choices": ["London", "Paris", "Rome", "Berlin"]}

    by_text = await score("choice", "(B)", "Paris", metadata=options)
    by_index = await score("choice", "B", 1, metadata=options)

    assert by_text.passed is True
    assert "B ('Paris')" in by_text.reason
    assert by_index.passed is True


async def test_a_reply_that_is_an_option_text_counts_as_its_letter() -> None:
    options = {"choices": ["London", "Paris", "Rome", "Berlin"]}

    outcome = await score("choice", "  paris.\n", "B", metadata=options)

    assert outcome.passed is True
    assert "option's text" in outcome.reason


async def test_options_from_a_dotted_path_as_an_object() -> None:
    metadata = {"q": {"options": {"a": "cat", "b": "dog"}}}

    outcome = await score(
        "choice", "dog", "b", metadata=metadata, options_field="q.options"
    )

    assert outcome.passed is True


async def test_an_expected_answer_that_is_no_choice_is_a_scorer_error() -> None:
    with pytest.raises(ValueError, match="is not a letter of ABCD"):
        await score("choice", "B", "Paris")
    with pytest.raises(ValueError, match="no expected answer"):
        await score("choice", "B", None)


async def test_a_huge_reply_is_read_in_bounded_time() -> None:
    reply = "lorem ipsum " * (HUGE // 12) + "The answer is (D)."

    outcome = await score("choice", reply, "D")

    assert outcome.passed is True


async def test_a_huge_reply_of_letters_is_ambiguous_not_a_hang() -> None:
    outcome = await score("choice", "A " * (HUGE // 2) + "B", "B")

    assert outcome.passed is False
    assert "ambiguous" in outcome.reason


def test_letters_must_be_distinct_letters() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "choice", "params": {"letters": "A,B"}}])

    assert caught.value.field == "scorers[0].params.letters"
    with pytest.raises(ConfigError, match="must not repeat a letter"):
        clean_scorer_specs([{"kind": "choice", "params": {"letters": "ABA"}}])

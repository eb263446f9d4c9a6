"""Token F1 with SQuAD's normalisation, the best of several answers."""

from __future__ import annotations

import pytest

from runs.errors import ConfigError
from runs.scorers import clean_scorer_specs
from tests.scorers.scoring import HUGE, score


async def test_squad_normalisation_ignores_case_punctuation_and_articles() -> None:
    outcome = await score("f1", "The  Denver Broncos!", "denver broncos")

    assert (outcome.value, outcome.passed) == (1.0, True)


async def test_partial_overlap_is_the_harmonic_mean_of_precision_and_recall() -> None:
    # 2 of 4 output tokens are right (precision 0.5); both answer tokens (recall 1).
    outcome = await score("f1", "Denver Broncos won easily", "Denver Broncos")

    assert outcome.value == pytest.approx(2 / 3)
    assert outcome.passed is True
    assert "precision 0.500, recall 1.000" in outcome.reason


async def test_threshold_decides_the_verdict_not_the_value() -> None:
    outcome = await score(
        "f1", "Denver Broncos won easily", "Denver Broncos", threshold=0.9
    )

    assert outcome.value == pytest.approx(2 / 3)
    assert outcome.passed is False
    assert "below 0.9" in outcome.reason


async def test_the_best_of_several_answers_counts() -> None:
    outcome = await score(
        "f1", "Saint Bernadette", ["Bernadette Soubirous", "Saint Bernadette"]
    )

    assert outcome.value == 1.0
    assert "'Saint Bernadette'" in outcome.reason


async def test_unicode_tokens_are_compared_as_written() -> None:
    outcome = await score("f1", "Ça va, Zoë?", "ça va zoë")

    assert outcome.value == 1.0


@pytest.mark.parametrize("output", ["", "   \n", None, "the a an ..."])
async def test_an_output_without_tokens_scores_zero(output: str | None) -> None:
    outcome = await score("f1", output, "Paris")

    assert (outcome.value, outcome.passed) == (0.0, False)


async def test_an_empty_expected_answer_matches_only_an_empty_output() -> None:
    assert (await score("f1", "", "")).value == 1.0
    assert (await score("f1", "Paris", "")).value == 0.0


async def test_a_huge_output_has_low_precision_not_a_hang() -> None:
    outcome = await score("f1", "word " * (HUGE // 5) + "Paris", "Paris")

    assert outcome.value < 0.001
    assert outcome.passed is False
    assert "1,048,577 output tokens" in outcome.reason


async def test_an_item_without_an_expected_answer_is_a_scorer_error() -> None:
    with pytest.raises(ValueError, match="no expected answer"):
        await score("f1", "Paris", None)


def test_threshold_is_bounded() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "f1", "params": {"threshold": 1.5}}])

    assert caught.value.field == "scorers[0].params.threshold"

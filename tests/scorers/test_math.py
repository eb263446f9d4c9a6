"""Math answers compared with math-verify, in worker processes, in bounded time."""

from __future__ import annotations

from typing import Any

import pytest

from runs.errors import ConfigError
from runs.scorers import ScoreOutcome, clean_scorer_specs
from tests.scorers.scoring import HUGE, score


async def math(output: Any, expected: Any = None, **params: Any) -> ScoreOutcome:
    """The math scorer's outcome, with the longest step limit unless a test
    sets its own: the default (5 s) bounds an expression's work, and on a busy
    machine a worker's first parse can take longer than that by itself."""
    params.setdefault("timeout_seconds", 60)
    return await score("math", output, expected, **params)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("1/2", "\\frac{1}{2}"),
        ("The answer is 0.5", "\\frac{1}{2}"),
        ("so $\\boxed{\\frac12}$.", "1/2"),
        ("\\boxed{\\frac{1}{2}}", "0.5"),
        ("The final answer is $50\\%$", "0.5"),
        ("It is 0.5", "50\\%"),
        ("$x = 3$", "3"),
        ("We get $\\frac{\\sqrt 3}{2}$", "\\frac{\\sqrt{3}}{2}"),
        ("Therefore $\\boxed{x^2+2x}$", "x(x+2)"),
        ("The answer is $\\pi$, about 3.14159265", "\\pi"),
        ("**Answer:** 1,000", "1000"),
    ],
)
async def test_equivalent_answers_agree(output: str, expected: str) -> None:
    outcome = await math(output, expected)

    assert (outcome.value, outcome.passed) == (1.0, True), outcome.reason


async def test_the_reason_shows_both_extracted_values() -> None:
    outcome = await math("Thus $\\boxed{\\frac12}$.", "0.5")

    assert outcome.reason.startswith(
        "answer `1/2 (from \\frac{1}{2})` equals expected "
    )


async def test_a_different_answer_fails_naming_both() -> None:
    outcome = await math("so the answer is \\boxed{4}", "3")

    assert (outcome.value, outcome.passed) == (0.0, False)
    assert outcome.reason == "answer `4` does not equal expected `3`"


async def test_the_last_boxed_answer_counts() -> None:
    reply = (
        "At first I thought \\boxed{2}. Checking the arithmetic again, step "
        "by step, shows a slip in the second line, so the answer is \\boxed{3}."
    )

    outcome = await math(reply, "3")

    assert outcome.passed is True


async def test_any_of_several_expected_answers() -> None:
    assert (await math("$\\boxed{-2}$", ["2", "-2"])).passed is True


@pytest.mark.parametrize("output", ["", None, "   ", "I cannot solve this.", "∞∞∞ 🙂"])
async def test_an_output_without_an_answer_fails_saying_so(output: str | None) -> None:
    outcome = await math(output, "3")

    assert outcome.passed is False
    assert outcome.reason.startswith("no answer found in the output; expected `3`")


async def test_float_rounding_is_the_numeric_tolerance() -> None:
    assert (await math("0.33", "1/3")).passed is False
    assert (await math("0.33", "1/3", float_rounding=2)).passed is True


async def test_a_huge_output_is_read_from_its_end() -> None:
    outcome = await math("blah " * (HUGE // 5) + "so \\boxed{7}", "7")

    assert outcome.passed is True
    assert "(read from the last 20,000 characters of the output)" in outcome.reason


async def test_a_hostile_expression_is_stopped_and_fails() -> None:
    outcome = await math("$\\boxed{10^{10^{10^{10}}}}$", "2", timeout_seconds=1)

    assert outcome.passed is False
    assert "took over" in outcome.reason


async def test_the_worker_pool_survives_a_stopped_check() -> None:
    await math("$\\boxed{10^{10^{10^{10}}}}$", "2", timeout_seconds=1)

    assert (await math("\\boxed{5}", "5")).passed is True


async def test_missing_or_unreadable_expected_answer_is_a_scorer_error() -> None:
    with pytest.raises(ValueError, match="no expected answer"):
        await math("3", None)
    with pytest.raises(ValueError, match="the expected answer is empty"):
        await math("3", "  ")


def test_timeout_is_bounded() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "math", "params": {"timeout_seconds": 0}}])

    assert caught.value.field == "scorers[0].params.timeout_seconds"


async def test_stopping_the_pool_leaves_no_worker_and_it_starts_again() -> None:
    import multiprocessing

    from runs.pools.processes import stop_scorer_processes

    await math("\\boxed{1}", "1")
    stop_scorer_processes()

    assert not multiprocessing.active_children()
    assert (await math("\\boxed{2}", "2")).passed is True

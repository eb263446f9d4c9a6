"""Custom scorers: allowlisted functions, sync in the pool, async on the loop."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from django.test import override_settings

from runs.errors import ConfigError
from runs.plugins.scoring import runs_on_loop
from runs.scorers import ScoreOutcome, build_scorer, clean_scorer_specs
from runs.targets import TargetInput
from tests.scorers.scoring import HUGE, score

HERE = "tests.scorers.test_python"
seen_threads: list[str] = []


def thread_name(output: Any, item: TargetInput) -> bool:
    seen_threads.append(threading.current_thread().name)
    return True


def ratio(output: Any, item: TargetInput) -> float:
    return len(str(output)) / len(str(item.expected))


def verdict(output: Any, item: TargetInput) -> dict[str, Any]:
    return {"passed": output == item.expected, "reason": f"compared {output!r}"}


def outcome(output: Any, item: TargetInput) -> ScoreOutcome:
    return ScoreOutcome(0.25, None, "a quarter")


def wrong_type(output: Any, item: TargetInput) -> str:
    return "yes"


def not_a_number(output: Any, item: TargetInput) -> float:
    return math.nan


def broken(output: Any, item: TargetInput) -> bool:
    raise KeyError("label")


class AsyncCallable:
    async def __call__(self, output: Any, item: TargetInput) -> bool:
        return True


async_callable = AsyncCallable()
ALLOWED = [
    f"{HERE}.{name}"
    for name in (
        "thread_name",
        "ratio",
        "verdict",
        "outcome",
        "wrong_type",
        "not_a_number",
        "broken",
        "async_callable",
    )
]
ALLOWED += [
    "runs.scorers.examples.non_empty",
    "runs.scorers.examples.starts_with_expected",
]


@pytest.fixture(autouse=True)
def _allow() -> Any:
    with override_settings(EVALSITE_PYTHON_SCORERS=ALLOWED):
        yield


def build(path: str, **params: Any) -> Any:
    spec = clean_scorer_specs(
        [{"kind": "python", "params": {"callable": path, **params}}]
    )
    return build_scorer(spec[0])


async def test_the_examples_allowlisted_by_default_work() -> None:
    with override_settings(EVALSITE_PYTHON_SCORERS=ALLOWED[-2:]):
        non_empty = await score("python", "  x ", callable=ALLOWED[-2])
        empty = await score("python", " \n", callable=ALLOWED[-2])
        prefix = await score("python", "Paris, France", "paris", callable=ALLOWED[-1])

    assert (non_empty.passed, empty.passed, prefix.passed) == (True, False, True)
    assert prefix.reason == "the output starts with 'paris'"


async def test_a_sync_function_runs_in_the_scorer_pool() -> None:
    seen_threads.clear()

    outcome = await score("python", "x", callable=f"{HERE}.thread_name")

    assert (outcome.value, outcome.passed) == (1.0, True)
    assert seen_threads[0].startswith("scorer")
    assert runs_on_loop(build(f"{HERE}.thread_name")) is False


async def test_an_async_function_runs_on_the_loop() -> None:
    scorer = build("runs.scorers.examples.starts_with_expected")

    assert runs_on_loop(scorer) is True
    assert runs_on_loop(build(f"{HERE}.async_callable")) is True


async def test_a_number_is_a_value_with_a_verdict_only_given_a_threshold() -> None:
    measured = await score("python", "abc", "abcdef", callable=f"{HERE}.ratio")
    judged = await score(
        "python", "abc", "abcdef", callable=f"{HERE}.ratio", threshold=0.5
    )

    assert (measured.value, measured.passed) == (0.5, None)
    assert (judged.value, judged.passed) == (0.5, True)


async def test_a_dict_and_a_score_outcome_are_taken_as_they_are() -> None:
    as_dict = await score("python", "ü", "ü", callable=f"{HERE}.verdict")
    as_outcome = await score("python", "x", callable=f"{HERE}.outcome")

    assert (as_dict.value, as_dict.passed, as_dict.reason) == (
        1.0,
        True,
        "compared 'ü'",
    )
    assert as_outcome == ScoreOutcome(0.25, None, "a quarter")


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("wrong_type", TypeError, "the function returned str"),
        ("not_a_number", ValueError, "not a finite number"),
        ("broken", KeyError, "label"),
    ],
)
async def test_a_bad_return_or_an_exception_is_a_scorer_error(
    name: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await score("python", None, callable=f"{HERE}.{name}")


def test_only_allowlisted_functions_are_accepted() -> None:
    with pytest.raises(ConfigError) as caught:
        build("os.system")

    assert caught.value.field == "scorers[0].params.callable"
    assert "is not in EVALSITE_PYTHON_SCORERS" in str(caught.value)


async def test_a_huge_output_reaches_the_function_whole() -> None:
    outcome = await score("python", "x" * HUGE, callable=ALLOWED[-2])

    assert outcome.passed is True

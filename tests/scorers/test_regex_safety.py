"""A user's pattern cannot stall the process: RE2 matches in linear time."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from runs.errors import ConfigError
from runs.plugins.scoring import ScorerCall
from runs.scorers import build_scorer, clean_scorer_specs
from runs.scorers.patterns import MAX_PATTERN_LENGTH
from runs.targets import TargetInput

# What the whole test may take. A backtracking engine needs longer than the age
# of the universe for these inputs; RE2 needs microseconds.
BUDGET_SECONDS = 20.0


class OverBudget(BaseException):
    """Raised by the alarm: a BaseException, so that no scorer can record it."""


@contextmanager
def budget(seconds: float = BUDGET_SECONDS) -> Iterator[None]:
    """Interrupt the block when it runs longer than ``seconds``.

    The alarm is delivered even inside a C regular-expression match, which
    checks for signals; so a backtracking match fails the test instead of
    hanging it.
    """

    def expire(signum: int, frame: object) -> None:
        raise OverBudget(f"still matching after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def regex(pattern: str, **params: object):
    spec = clean_scorer_specs(
        [{"kind": "regex", "params": {"pattern": pattern, **params}}]
    )
    return build_scorer(spec[0])


def item(expected: object = None) -> TargetInput:
    return TargetInput(index=0, external_id="x", input="q", expected=expected)


async def judge(scorer, output: str, expected: object = None):
    """Scores as the executor does: through a worker, off the event loop."""
    return await ScorerCall(scorer, output, item(expected)).run()


@pytest.mark.parametrize(
    ("pattern", "output"),
    [
        (r"(a+)+$", "a" * 26 + "!"),  # 10.6 s of frozen server, as reported
        (r"(a+)+$", "a" * 100_000 + "!"),
        (r"(a|aa)*b", "a" * 100_000),
        (r"^(\w+\s?)*$", "word " * 20_000 + "!"),
        (r"^(a|a?)+$", "a" * 50_000 + "b"),
    ],
)
async def test_catastrophic_patterns_get_a_verdict_within_budget(pattern, output):
    with budget():
        outcome = await judge(regex(pattern), output)
    assert (outcome.value, outcome.passed) == (0.0, False)
    assert outcome.reason == f"no match for /{pattern}/"


async def test_a_catastrophic_pattern_that_matches_says_what_matched():
    with budget():
        outcome = await judge(regex(r"(a+)+!"), "a" * 100_000 + "!")
    assert outcome.passed is True
    assert outcome.reason.startswith("matched 'aaaa")


async def test_the_expected_placeholder_cannot_smuggle_a_catastrophic_pattern():
    # The answer is inserted escaped: "(a+)+$" is looked for as text.
    scorer = regex(r"{expected}")
    with budget():
        outcome = await judge(scorer, "a" * 100_000 + "!", "(a+)+$")
        literal = await judge(scorer, "is (a+)+$ here", "(a+)+$")
    assert (outcome.passed, literal.passed) == (False, True)


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(a)\1", r"backreference \(\\1"),
        (r"(?P<x>a)(?P=x)", r"named backreference \(\?P=name\)"),
        (r"foo(?=bar)", r"lookahead \(\?=\.\.\.\)"),
        (r"foo(?!bar)", r"negative lookahead \(\?!\.\.\.\)"),
        (r"(?<=\$)\d+", r"lookbehind \(\?<=\.\.\.\)"),
        (r"(?<!-)\d+", r"negative lookbehind \(\?<!\.\.\.\)"),
        (r"(?>a+)b", r"atomic group \(\?>\.\.\.\)"),
        (r"a++b", r"possessive quantifier"),
        (r"(?(1)a|b)", r"conditional group"),
        (r"end\Z", r"write \\z for the end of the text"),
    ],
)
def test_constructs_without_a_linear_time_match_are_refused_by_name(pattern, construct):
    where = r"scorers\[0\]\.params\.pattern'?: "
    with pytest.raises(ConfigError, match=where) as caught:
        regex(pattern)
    assert caught.match(construct)


def test_an_invalid_pattern_is_refused_with_the_engines_reason():
    with pytest.raises(
        ConfigError,
        match=r"params\.pattern'?: is not a valid regular expression .*missing \)",
    ):
        regex("(unclosed")


def test_an_oversized_pattern_is_refused():
    with pytest.raises(ConfigError, match=r"params\.pattern'?: is longer than"):
        regex("a" * (MAX_PATTERN_LENGTH + 1))
    with pytest.raises(ConfigError, match=r"params\.pattern'?: .*repetition size"):
        regex(r"((a{1000}){1000}){1000}")


def test_a_pattern_must_be_text():
    with pytest.raises(ConfigError, match=r"params\.pattern'?: must be a string"):
        regex(42)  # type: ignore[arg-type]


async def test_ignore_case_and_pythons_named_groups_still_work():
    scorer = regex(r"ANSWER:\s*(?P<n>\d+)", ignore_case=True)
    assert (await judge(scorer, "answer: 7")).passed is True


async def test_a_hostile_pattern_is_matched_in_a_worker_not_on_the_loop():
    import threading

    loop_thread = threading.get_ident()
    scorer = regex(r"(a+)+$")
    seen: list[int] = []
    original = scorer.score

    def recording(**kwargs: object):
        seen.append(threading.get_ident())
        return original(**kwargs)

    scorer.score = recording  # type: ignore[method-assign]
    with budget():
        outcome = await ScorerCall(scorer, "a" * 26 + "!", item()).run()
    assert outcome.passed is False
    assert seen and loop_thread not in seen


async def test_an_expected_answer_too_large_for_the_engine_is_a_scorer_error():
    with pytest.raises(ValueError, match="pattern too large"):
        await judge(regex("{expected}"), "ab", "ab" * 3_000_000)

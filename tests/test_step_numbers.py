"""A step's numbers (tokens, latency, cost) are read by one reader, whether they
come from an agent's answer or from a span: the same values are taken alike,
and a value that is no count is refused by one (naming the field) and passed
over by the other, never a crash."""

from __future__ import annotations

import math
from typing import Any

import pytest

from runs.plugins.step_shapes import ShapeError, read_steps
from runs.traces.otlp import Span
from runs.traces.spans import step_of

TAKEN = [(0, 0), (7, 7), (7.9, 7), (1e6, 1_000_000)]
REFUSED = [
    (-1, "must not be negative"),
    (True, "must be a number"),
    ("7", "must be a number"),
    ([7], "must be a number"),
    (math.nan, "must be a finite number"),
    (math.inf, "must be a finite number"),
]


def from_answer(tokens: Any) -> int | None:
    (step,) = read_steps([{"kind": "model", "name": "m", "prompt_tokens": tokens}])
    return step.prompt_tokens


def from_span(tokens: Any) -> int | None:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": tokens}
    step = step_of(Span("t", "s", "chat", 1, 2, attributes))
    assert step is not None
    return step.prompt_tokens


@pytest.mark.parametrize(("reported", "read"), TAKEN)
def test_a_count_is_read_alike_from_an_answer_and_a_span(
    reported: Any, read: int
) -> None:
    assert from_answer(reported) == from_span(reported) == read


@pytest.mark.parametrize(("reported", "message"), REFUSED)
def test_a_value_that_is_no_count_is_refused_or_passed_over(
    reported: Any, message: str
) -> None:
    with pytest.raises(ShapeError) as refused:
        from_answer(reported)
    assert str(refused.value) == f"[0].prompt_tokens {message}"
    assert from_span(reported) is None


def test_a_span_passes_over_a_bad_count_to_the_next_convention() -> None:
    attributes = {
        "openinference.span.kind": "LLM",
        "gen_ai.usage.input_tokens": math.nan,
        "llm.token_count.prompt": 12,
    }
    step = step_of(Span("t", "s", "llm", 1, 2, attributes))
    assert step is not None and step.prompt_tokens == 12


def test_amounts_keep_their_fraction() -> None:
    (step,) = read_steps(
        [{"kind": "tool", "name": "t", "latency_ms": 1.5, "cost": 2, "error": None}]
    )
    assert (step.latency_ms, step.cost) == (1.5, 2.0)
    assert isinstance(step.cost, float)
    with pytest.raises(ShapeError, match=r"^\[0\]\.cost must not be negative$"):
        read_steps([{"kind": "tool", "name": "t", "cost": -0.5}])

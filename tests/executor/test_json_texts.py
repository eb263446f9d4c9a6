"""The JSON texts of stored values and request bodies are json.dumps's and
httpx's own texts, errors included, made without a Python call per value."""

from __future__ import annotations

import enum
import json
import math
import sys
from typing import Any

import pytest

from runs.calls.http_client import BODY_ENCODER
from runs.records.json_texts import JsonText
from runs.records.plain_rows import json_text


class Status(enum.StrEnum):
    SUCCEEDED = "succeeded"


ATTEMPTS = [
    {
        "number": 1,
        "started_at": "2026-11-26T21:48:54.123456+00:00",
        "outcome": "ok",
        "http_status": 200,
        "prompt_tokens": 12,
        "completion_tokens": 3,
        "model": "bench",
        "cost": 1.5e-05,
        "finished_at": "2026-11-26T21:48:55+00:00",
        "latency_ms": 1.234,
    }
]
VALUES: list[Any] = [
    ATTEMPTS,
    "3",
    "café ✓ \u2028 \x00 \ud800",
    12,
    2**70,
    -0.0,
    1e300,
    0.1,
    True,
    None,
    [],
    {},
    (1, "two", [3.5, None]),
    {"nested": {"list": [{"a": [1, {"b": "é"}]}]}, "status": Status.SUCCEEDED},
    {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
]
BAD: list[Any] = [
    {"a": object()},
    [1, {2, 3}],
    {("tuple", "key"): 1},
]


def same(make: Any, reference: Any, value: Any) -> None:
    """``make(value)`` gives ``reference(value)``'s text, or its error."""
    try:
        expected = reference(value)
    except Exception as exc:
        with pytest.raises(type(exc)) as caught:
            make(value)
        assert str(caught.value) == str(exc)
    else:
        assert make(value) == expected


@pytest.mark.parametrize("value", VALUES + BAD + [math.nan, [math.inf]])
def test_a_stored_values_text_is_json_dumps(value: Any) -> None:
    same(json_text, lambda v: None if v is None else json.dumps(v), value)


@pytest.mark.parametrize("value", VALUES + BAD + [math.nan, [math.inf]])
def test_a_request_body_is_the_text_httpx_sends(value: Any) -> None:
    # httpx's body for json=...: compact, UTF-8 as it is, no NaN.
    def httpx_text(value: Any) -> str:
        return json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )

    same(BODY_ENCODER, httpx_text, value)


def test_a_cycle_is_refused_as_json_dumps_refuses_it_and_leaves_no_trace() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    same(json_text, json.dumps, cycle)
    same(json_text, json.dumps, {"a": cycle})
    # What one value's failure left behind does not touch the next.
    assert json_text([cycle[0], [1]]) == "[1, [1]]"


def test_sorted_and_indented_options_are_the_encoders_own() -> None:
    value = {"b": [1, 2], "a": {"c": None}}
    assert JsonText(sort_keys=True)(value) == json.dumps(value, sort_keys=True)
    assert JsonText(indent=2)(value) == json.dumps(value, indent=2)


def test_a_result_rows_json_is_made_without_a_python_call() -> None:
    # json.dumps goes through dumps, encode and iterencode (which makes a C
    # encoder each time) for every value: three Python calls, twice a result.
    calls: list[str] = []

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(count)
    try:
        text = json_text(ATTEMPTS)
        body = BODY_ENCODER({"model": "bench", "messages": ATTEMPTS})
    finally:
        sys.setprofile(None)
    assert text == json.dumps(ATTEMPTS)
    assert json.loads(body)["messages"] == ATTEMPTS
    assert calls == ["json_text", "__call__", "__call__"]

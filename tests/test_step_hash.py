"""A tool call's stable hash and a step's bounded payloads (runs/plugins/steps.py)."""

from __future__ import annotations

import json

from runs.plugins.steps import STEP_PAYLOAD_BYTES, bounded, call_hash


def test_the_hash_ignores_key_order():
    assert call_hash("search", {"q": "x", "n": 2}) == call_hash(
        "search", {"n": 2, "q": "x"}
    )


def test_missing_and_none_arguments_differ():
    assert call_hash("search", {}) != call_hash("search", {"q": None})


def test_a_function_argument_hashes_by_type_not_address():
    def one() -> None: ...

    def two() -> None: ...

    assert call_hash("run", {"f": one}) == call_hash("run", {"f": two})
    assert call_hash("run", {"f": one}) != call_hash("run", {"f": 1})


def test_the_tool_name_counts():
    assert call_hash("a", {"x": 1}) != call_hash("b", {"x": 1})


def test_a_small_payload_is_kept_whole_with_its_size():
    value = {"q": "é"}
    kept, size = bounded(value)
    assert kept == value
    assert size == len(
        json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    )


def test_a_large_payload_is_cut_and_keeps_its_size():
    value = {"blob": "x" * (3 * STEP_PAYLOAD_BYTES)}
    kept, size = bounded(value)
    assert isinstance(kept, str)
    assert len(kept.encode()) <= STEP_PAYLOAD_BYTES
    assert size > 3 * STEP_PAYLOAD_BYTES
    assert kept.startswith('{"blob":"xxx')

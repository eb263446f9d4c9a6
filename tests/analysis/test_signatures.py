"""Signatures: one failure, however its details vary, is one signature."""

from __future__ import annotations

import pytest

from runs.records.signatures import (
    PATTERN_MAX_LENGTH,
    error_signature,
    mask,
    score_signature,
)


def _signature(message: str, *, kind: str = "permanent", error_type: str = "HTTP400"):
    return error_signature(kind=kind, error_type=error_type, message=message).signature


def _same(*messages: str) -> bool:
    return len({_signature(message) for message in messages}) == 1


def test_request_ids_and_token_counts_do_not_split_a_failure() -> None:
    assert _same(
        "HTTP 400 Bad Request: This model's maximum context length is 8192 tokens. "
        "However, you requested 9133 tokens (request id req_8f3a9c2d1e7b)",
        "HTTP 400 Bad Request: This model's maximum context length is 8192 tokens. "
        "However, you requested 12,020 tokens (request id req_01HF3ZK2QW9X)",
    )


def test_completion_ids_with_a_dash_are_masked() -> None:
    assert _same(
        "malformed response chatcmpl-9xYzAbC123DeF: no choices",
        "malformed response chatcmpl-AB12cd34EF56gh: no choices",
    )


def test_any_prefixed_long_id_is_masked_and_its_prefix_kept() -> None:
    assert mask("org-AbC123dEf456 and call_x1y2z3w4 and run_42abcdef") == (
        "org-<id> and call_<id> and run_<id>"
    )


def test_urls_are_masked() -> None:
    assert _same(
        "cannot connect to https://api.example.com/v1/chat/completions?key=1",
        "cannot connect to http://10.0.0.7:8080/v2/generate",
    )


def test_quoted_values_are_masked() -> None:
    assert _same(
        "Invalid value 'foo bar' for parameter \"stop\"",
        "Invalid value 'x' for parameter \"logit_bias\"",
    )
    assert _same("unknown model `gpt-x`", "unknown model `llama-3-70b`")


def test_an_apostrophe_in_a_word_is_not_a_quote() -> None:
    assert mask("the model's answer can't be parsed") == (
        "the model's answer can't be parsed"
    )


def test_json_keys_are_kept_and_values_masked() -> None:
    assert mask('{"error": "bad", "code": 17}') == '{"error": <str>, "code": <n>}'


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("2026-11-22T16:57:13.123Z", "2025-01-02T03:04:05+01:00"),
        ("2026-11-22 16:57:13", "2026-01-01 00:00:00"),
        ("22/Nov/2026:16:57:13 +0000", "01/Jan/2025:00:00:01 -0500"),
        ("Sun, 22 Nov 2026 16:57:13 GMT", "Mon, 01 Dec 2025 08:00:00 GMT"),
        ("Nov 22 16:57:13", "Dec  1 08:00:00"),
    ],
)
def test_timestamps_are_masked(first: str, second: str) -> None:
    assert _same(
        f"upstream failed at {first}: retry", f"upstream failed at {second}: retry"
    )
    assert "<time>" in mask(f"upstream failed at {first}: retry")


def test_uuids_hex_and_numbers_are_masked() -> None:
    assert (
        mask(
            "trace 550e8400-e29b-41d4-a716-446655440000 at 0x7ffee1 hash deadbeef1234, "
            "retry in 2.5 s after -3 tries"
        )
        == "trace <uuid> at <hex> hash <hex>, retry in <n> s after <n> tries"
    )


def test_file_paths_are_masked() -> None:
    assert _same(
        "No such file or directory: /tmp/run-1/out.json",
        "No such file or directory: /var/lib/data/x.txt",
    )
    assert _same("cannot open C:\\Users\\ann\\a.txt", "cannot open D:\\data\\b.csv")


def test_numbers_with_a_unit_are_masked() -> None:
    assert _same(
        "Rate limit reached: Limit 30000, Used 29,812. Please try again in 2.408s.",
        "Rate limit reached: Limit 30000, Used 30,000. Please try again in 20s.",
    )


def test_different_failures_stay_apart() -> None:
    signatures = {
        _signature("HTTP 400 Bad Request: maximum context length is 8192 tokens"),
        _signature("HTTP 400 Bad Request: invalid 'temperature': must be at most 2"),
        _signature("HTTP 400 Bad Request: unknown model 'gpt-x'"),
        _signature("malformed response: message has no content"),
    }
    assert len(signatures) == 4


def test_the_same_message_of_another_type_or_kind_is_another_failure() -> None:
    message = "connection reset by peer"
    assert _signature(message, error_type="ReadError") != _signature(
        message, error_type="ConnectError"
    )
    assert _signature(message, kind="transient") != _signature(
        message, kind="permanent"
    )


def test_a_long_message_gives_a_bounded_pattern() -> None:
    signature = error_signature(
        kind="permanent", error_type="ValueError", message="word " * 5_000
    )
    assert len(signature.pattern) <= PATTERN_MAX_LENGTH
    assert len(signature.signature) == 16


def test_failing_score_reasons_are_grouped_by_their_mask() -> None:
    first = score_signature(passed=False, reason="expected '42', got '41'", error="")
    second = score_signature(passed=False, reason="expected '7', got 'seven'", error="")
    assert first is not None and second is not None
    assert first.signature == second.signature
    assert first.pattern == "expected <str>, got <str>"


def test_a_passing_score_has_no_signature() -> None:
    assert score_signature(passed=True, reason="ok", error="") is None
    assert score_signature(passed=None, reason="", error="") is None


def test_a_scorer_error_is_not_the_same_failure_as_a_failed_verdict() -> None:
    errored = score_signature(passed=None, reason="", error="TimeoutError: 5 s")
    failed = score_signature(passed=False, reason="TimeoutError: 5 s", error="")
    assert errored is not None and failed is not None
    assert errored.signature != failed.signature


def test_a_number_after_a_hyphen_is_masked_digits_inside_a_word_are_kept() -> None:
    # As the masks' comments say: gpt-4o reads gpt-<n>o, gpt4o stays.
    assert mask("model gpt-4o failed on item42") == "model gpt-<n>o failed on item<n>"
    assert mask("model gpt4o failed") == "model gpt4o failed"

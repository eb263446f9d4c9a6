"""Validating a file in one reading: the same rows, hash and first error as
checking every record before mapping any, with a hash per id instead of the ids."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from runs.datasets.importers import items as validation
from runs.datasets.importers.parsers import Where
from runs.errors import InvalidInput


def _records(rows: list[Any]) -> tuple[Callable[[], Iterator[Any]], list[int]]:
    """A JSONL file's records, and a list counting each time they are read."""
    readings: list[int] = []

    def read() -> Iterator[Any]:
        readings.append(1)
        for line, row in enumerate(rows, start=1):
            yield Where(line=line), row

    return read, readings


def _expected_hash(rows: list[dict[str, Any]]) -> str:
    """sha256 over the mapped rows, as the hash is defined (independently)."""
    digest = hashlib.sha256()
    for index, row in enumerate(rows):
        mapped = {
            "index": index,
            "external_id": str(row["id"]),
            "input": row["input"],
            "expected": row.get("expected"),
            "metadata": {
                k: v for k, v in row.items() if k not in ("id", "input", "expected")
            },
        }
        digest.update(
            json.dumps(
                mapped, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode()
        )
        digest.update(b"\n")
    return digest.hexdigest()


ROWS = [
    {"id": f"q{n}", "input": f"{n} + 1?", "expected": str(n + 1), "topic": "sums"}
    for n in range(50)
]


def test_a_good_file_is_read_once_to_validate_and_once_to_store() -> None:
    read, readings = _records(ROWS)

    parsed = validation.normalise(read, fields=validation.DEFAULT_FIELDS, fmt="jsonl")

    assert len(readings) == 1
    rows = parsed.rows
    assert len(readings) == 2
    assert parsed.content_hash == _expected_hash(ROWS)
    assert [row.external_id for row in rows] == [f"q{n}" for n in range(50)]
    assert rows[3].metadata == {"topic": "sums"}


def test_ids_with_one_hash_are_checked_again_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if two different ids had the same 64-bit hash.
    monkeypatch.setattr(validation, "_repeats", lambda hashes: True)
    read, readings = _records(ROWS)

    parsed = validation.normalise(read, fields=validation.DEFAULT_FIELDS, fmt="jsonl")

    assert len(readings) == 2
    assert parsed.content_hash == _expected_hash(ROWS)
    assert parsed.count == 50


def test_a_repeated_id_names_both_lines() -> None:
    rows = [*ROWS[:10], {"id": "q4", "input": "again"}, *ROWS[10:]]
    read, _ = _records(rows)

    with pytest.raises(InvalidInput) as raised:
        validation.normalise(read, fields=validation.DEFAULT_FIELDS, fmt="jsonl")

    assert str(raised.value) == (
        "line 11, field 'id': duplicate id 'q4', first used on line 5"
    )


def test_a_record_error_anywhere_comes_before_a_repeated_id() -> None:
    rows = [*ROWS[:10], {"id": "q4", "input": "again"}, *ROWS[10:], {"id": "x"}]
    read, _ = _records(rows)

    with pytest.raises(InvalidInput) as raised:
        validation.normalise(read, fields=validation.DEFAULT_FIELDS, fmt="jsonl")

    assert str(raised.value) == "line 52, field 'input': the input field is missing"


def test_a_first_record_without_the_id_is_named_when_a_later_one_has_it() -> None:
    rows = [
        {"input": "a", "expected": "a"},
        {"input": "b"},
        {"id": "c", "input": "c"},
    ]
    read, _ = _records(rows)

    with pytest.raises(InvalidInput) as raised:
        validation.normalise(read, fields=validation.DEFAULT_FIELDS, fmt="jsonl")

    assert str(raised.value) == (
        "line 1, field 'id': the id field is missing, but other items have one (line 3)"
    )


def test_items_without_ids_are_numbered() -> None:
    read, readings = _records([{"input": "a", "expected": "a"}, {"input": "b"}])

    parsed = validation.normalise(read, fields=validation.DEFAULT_FIELDS, fmt="jsonl")

    assert len(readings) == 1
    assert [row.external_id for row in parsed.rows] == ["1", "2"]


def test_a_value_that_cannot_be_stored_is_named_after_earlier_repeats() -> None:
    rows = [*ROWS[:3], {"id": "q1", "input": "x"}, {"id": "n", "input": float("nan")}]
    read, _ = _records(rows)

    with pytest.raises(InvalidInput) as raised:
        validation.normalise(read, fields=validation.DEFAULT_FIELDS, fmt="jsonl")

    assert str(raised.value) == (
        "line 4, field 'id': duplicate id 'q1', first used on line 2"
    )


@pytest.mark.parametrize(
    ("text", "refused"),
    [("a\u0000b", True), ("a\\u0000b", False), ("plain", False)],
)
def test_nul_characters_are_refused_and_their_escapes_kept(
    text: str, refused: bool
) -> None:
    if refused:
        with pytest.raises(InvalidInput, match="NUL character"):
            validation.canonical({"input": text}, Where(line=1))
    else:
        assert validation.canonical({"input": text}, Where(line=1))

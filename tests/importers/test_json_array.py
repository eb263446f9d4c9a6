"""A JSON array read a record at a time gives what ``json.loads`` gives, whatever
pieces the file arrives in, with the lines of records and errors right."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest

from runs.datasets.importers.json_array import json_records
from runs.errors import InvalidInput

DOCUMENT = (
    '\ufeff[\n  {"id": 1, "input": "caf\u00e9 \u2028 \\u00e9", "n": -12.5e3},\n'
    '  {"id": 2, "input": [true, false, null], "x": {"y": "]},["}},\n\n'
    '  123456789, "\\"quoted\\"", [], {}\n]\n'
).encode()


class Trickle(io.BytesIO):
    """A file that hands out at most ``size`` bytes per read, as a pipe may."""

    def __init__(self, content: bytes, size: int) -> None:
        super().__init__(content)
        self.size = size

    def read(self, size: int | None = -1) -> bytes:
        return super().read(
            self.size if size is None or size < 0 else min(size, self.size)
        )


def _records(content: bytes, piece: int) -> list[tuple[int | None, int, object]]:
    return list(json_records(Trickle(content, piece)))


@pytest.mark.parametrize("piece", [1, 2, 3, 5, 7, 64 * 1024])
def test_records_and_their_lines_do_not_depend_on_how_the_file_arrives(
    piece: int,
) -> None:
    expected = json.loads(DOCUMENT.decode("utf-8-sig"))

    records = _records(DOCUMENT, piece)

    assert [value for _, _, value in records] == expected
    assert [(number, line) for number, line, _ in records] == [
        (1, 2),
        (2, 3),
        (3, 5),
        (4, 5),
        (5, 5),
        (6, 5),
    ]


@pytest.mark.parametrize("piece", [1, 3, 64 * 1024])
def test_a_number_cut_by_a_read_is_read_whole(piece: int) -> None:
    content = b"[" + b",".join(b"1234567.25e-3" for _ in range(50)) + b"]"

    assert {value for _, _, value in _records(content, piece)} == {1234.56725}


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (b'[\n{"a": 1},\n{"a": 1,,}\n]', 3, "invalid JSON: Expecting property name"),
        (b'[\n{"a": 1}\n{"a": 2}\n]', 3, "invalid JSON: expecting ',' or ']'"),
        (b'[\n{"a": 1},\n{"a": "open', 3, "invalid JSON: Unterminated string"),
        (b'[\n{"a": 1}\n]\n[]', 4, "invalid JSON: more data after the array"),
        (b'[\n{"a": 1},\n{"a": "caf\xe9"}]', 3, "the file is not valid UTF-8"),
    ],
)
@pytest.mark.parametrize("piece", [1, 4, 64 * 1024])
def test_errors_name_their_line_however_the_file_arrives(
    content: bytes, line: int, message: str, piece: int
) -> None:
    with pytest.raises(InvalidInput) as info:
        _records(content, piece)

    assert info.value.line == line
    assert info.value.message.startswith(message)


def test_a_document_that_is_not_an_array_is_one_value_without_a_number() -> None:
    assert _records(b'\n {"problem": "p"}\n', 3) == [(None, 2, {"problem": "p"})]


@pytest.mark.parametrize("piece", [3, 64 * 1024])
def test_an_error_far_along_one_long_line_names_its_column(piece: int) -> None:
    content = b"[" + b'{"a": 1}, ' * 20_000 + b'{"a": 1,,}]'
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(content)

    with pytest.raises(InvalidInput) as info:
        _records(content, piece)

    assert info.value.line == 1
    assert info.value.message == (
        f"invalid JSON: {expected.value.msg} (column {expected.value.colno})"
    )


def test_a_long_one_line_array_is_read_in_memory_that_does_not_grow_with_it() -> None:
    record = json.dumps({"id": 0, "input": "x" * 100, "expected": "y"}).encode()
    content = b"[" + b", ".join([record] * 40_000) + b"]"  # 5 MB on one line
    tracemalloc.start()
    try:
        count = sum(1 for _ in json_records(io.BytesIO(content)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert count == 40_000
    assert peak < 1024 * 1024

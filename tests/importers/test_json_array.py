"""A JSON array read a record at a time gives what ``json.loads`` gives, whatever
pieces the file arrives in, with the lines of records and errors right."""

from __future__ import annotations

import io
import json

import pytest

from runs.errors import InvalidInput
from runs.importers.json_array import json_records

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

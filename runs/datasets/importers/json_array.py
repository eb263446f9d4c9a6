"""A JSON document read a record at a time, in memory that does not grow with it.

A top-level array is read from the file in chunks; each record is decoded
with the standard library's (C) decoder as soon as its text is in the buffer,
given with the 1-based record number and the line it starts on, and then
forgotten. The buffer holds the current chunk and at most one record, and a
record's text may not exceed ``raw_record_limit()`` bytes, so a file of any
size costs the same memory, and whoever reads the records stops at the first
bad one without the rest being read.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from django.conf import settings

from runs.errors import InvalidInput

CHUNK = 64 * 1024
BOM = "\ufeff"
# A record's text may hold whitespace and escapes ("\u00e9" is 6 bytes for 2)
# that its compact form, which EVALSITE_MAX_ITEM_BYTES measures, does not.
RAW_FACTOR = 8
_SPACE = re.compile(r"[ \t\n\r]*")
_NUMBER_CHARS = frozenset("0123456789+-.eE")
# How close to the end of the buffer an error may be a record cut by it.
_CUT_MARGIN = 16
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_LONG_NUMBER = f"a number has more than {sys.get_int_max_str_digits()} digits"


def raw_record_limit() -> int:
    """The most bytes of text one record (or one line) may take in a file."""
    return RAW_FACTOR * settings.EVALSITE_MAX_ITEM_BYTES


def json_error(exc: json.JSONDecodeError) -> str:
    return f"invalid JSON: {exc.msg} (column {exc.colno})"


def too_large(limit: int) -> str:
    return (
        f"a record takes more than {limit:,} bytes of text; an item may take at "
        f"most {settings.EVALSITE_MAX_ITEM_BYTES:,} (EVALSITE_MAX_ITEM_BYTES)"
    )


class JsonText:
    """The text of a binary stream, decoded as UTF-8 a chunk at a time.

    What was read before the current position is dropped at each refill (a
    JSON array is often one long line); ``first_line`` and ``first_column``
    say where in the file ``text`` starts, for the lines and columns of errors.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.position = 0
        self.first_line = 1
        self.first_column = 1
        self.counted = 0  # newlines are counted up to here
        self.counted_line = 1  # the line at ``counted``
        self.eof = False
        self.started = False

    def line_at(self, position: int) -> int:
        """The line of ``position``, which never moves backwards between calls."""
        self.counted_line += self.text.count("\n", self.counted, position)
        self.counted = position
        return self.counted_line

    def fill(self, size: int = CHUNK) -> None:
        """Read about ``size`` more bytes, dropping the text already read."""
        cut = min(self.position, self.counted)
        if cut:
            last_newline = self.text.rfind("\n", 0, cut)
            if last_newline < 0:
                self.first_column += cut
            else:
                self.first_line += self.text.count("\n", 0, cut)
                self.first_column = cut - last_newline
            self.text = self.text[cut:]
            self.position -= cut
            self.counted -= cut
        raw = self.stream.read(size)
        self.eof = not raw
        pending = self.utf8.getstate()[0]
        try:
            more = self.utf8.decode(raw, final=self.eof)
        except UnicodeDecodeError as exc:
            data = pending + raw  # what the error's offsets count
            line = self.first_line + self.text.count("\n")
            line += data.count(b"\n", 0, exc.start)
            raise InvalidInput(
                f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                line=line,
            ) from None
        if more and not self.started:
            self.started = True
            more = more.removeprefix(BOM)  # spreadsheet programs write one
        self.text += more

    def skip_space(self) -> str:
        """The next character after whitespace, or "" at the end of the file."""
        while True:
            match = _SPACE.match(self.text, self.position)
            self.position = match.end() if match else self.position
            if self.position < len(self.text) or self.eof:
                return self.text[self.position : self.position + 1]
            self.fill()

    def value(self, decoder: json.JSONDecoder, *, limit: int) -> Any:
        """The JSON value at the position, read on until its text is complete."""
        while True:
            start = self.position
            try:
                value, end = decoder.raw_decode(self.text, start)
            except json.JSONDecodeError as exc:
                if self.eof or not self._maybe_cut(exc):
                    message = f"invalid JSON: {exc.msg} (column {self.column(exc.pos)})"
                    raise self.error(message, exc.pos) from None
            except RecursionError:
                raise self.error(
                    "invalid JSON: nested too deeply", self._deepest(start)
                ) from None
            except ValueError:  # an integer with too many digits
                raise self.error(f"invalid JSON: {_LONG_NUMBER}", start) from None
            else:
                # A number at the end of the buffer may go on in the next chunk.
                if self.eof or (
                    end < len(self.text) and self.text[end] not in _NUMBER_CHARS
                ):
                    self.position = end
                    return value
            if len(self.text) - start > limit:
                raise self.error(too_large(limit), start)
            self.fill(max(CHUNK, len(self.text) - start))

    def _maybe_cut(self, exc: json.JSONDecodeError) -> bool:
        return exc.pos >= len(self.text) - _CUT_MARGIN or exc.msg.startswith(
            "Unterminated string"
        )

    def error(self, message: str, position: int) -> InvalidInput:
        """An error at ``position`` of the buffer, naming its line in the file."""
        line = self.first_line + self.text.count("\n", 0, position)
        return InvalidInput(message, line=line)

    def column(self, position: int) -> int:
        """The 1-based column in the file of ``position`` in the buffer."""
        line_start = self.text.rfind("\n", 0, position) + 1
        first = self.first_column if line_start == 0 else 1
        return first + position - line_start

    def _deepest(self, start: int) -> int:
        """Where the value at ``start`` first reaches its deepest nesting."""
        depth = deepest = 0
        position = start
        for match in _JSON_TOKENS.finditer(self.text, start):
            token = match.group()
            if token in "[{":
                depth += 1
                if depth > deepest:
                    deepest, position = depth, match.start()
            elif token in "]}":
                depth -= 1
                if depth == 0:
                    break
        return position


def json_records(stream: BinaryIO) -> Iterator[tuple[int | None, int, Any]]:
    """(record number, line, value) for each record of a JSON array in ``stream``.

    A document that is not an array is one value without a record number.
    """
    limit = raw_record_limit()
    decoder = json.JSONDecoder()
    text = JsonText(stream)
    first = text.skip_space()
    if not first:
        raise InvalidInput("the file has no items")
    if first != "[":
        line = text.line_at(text.position)
        value = text.value(decoder, limit=limit)
        _end(text, "invalid JSON: more data after the value")
        yield None, line, value
        return
    text.position += 1
    number = 0
    closed = text.skip_space() == "]"
    while not closed:
        number += 1
        line = text.line_at(text.position)
        yield number, line, text.value(decoder, limit=limit)
        following = text.skip_space()
        closed = following == "]"
        if not closed:
            if following != ",":
                raise text.error(
                    "invalid JSON: expecting ',' or ']' after a record", text.position
                )
            text.position += 1
            text.skip_space()
    text.position += 1
    _end(text, "invalid JSON: more data after the array")


def _end(text: JsonText, message: str) -> None:
    if text.skip_space():
        raise text.error(message, text.position)

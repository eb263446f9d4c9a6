"""Files that would cost the server time or memory out of proportion to their size
are refused early, with an error naming the limit, after reading no more of
them than needed."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from typing import BinaryIO

import pytest
import yaml

from runs.datasets.importers import (
    FieldMap,
    InvalidRecord,
    Source,
    parse_items,
    preview_file,
)
from runs.errors import InvalidInput

NO_EXPECTED = FieldMap(expected=None)
MB = 1024 * 1024


class CountingFile(io.BytesIO):
    """A file that counts the bytes read from it."""

    def __init__(self, content: bytes) -> None:
        super().__init__(content)
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data

    def readline(self, size: int | None = -1) -> bytes:
        data = super().readline(size)
        self.bytes_read += len(data)
        return data


def _counted(content: bytes, name: str) -> tuple[Source, list[CountingFile]]:
    opened: list[CountingFile] = []

    @contextlib.contextmanager
    def open_() -> Iterator[BinaryIO]:
        opened.append(CountingFile(content))
        yield opened[-1]

    return Source(name=name, size=len(content), open=open_), opened


def _preview_error(source: Source) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        preview_file(source=source)
    return info.value


# -- CSV header -----------------------------------------------------------------------


def test_csv_with_more_columns_than_the_limit_is_refused_naming_both() -> None:
    header = ",".join(f"c{n}" for n in range(10_000))
    content = f"{header}\n{','.join(['x'] * 10_000)}\n".encode()

    error = _preview_error(Source.from_bytes(content, name="x.csv"))

    assert str(error) == (
        "line 1: the header has 10,000 columns; the limit is 2,000 "
        "(EVALSITE_MAX_COLUMNS)"
    )


def test_csv_repeated_columns_are_all_named() -> None:
    content = b"id,input,id,topic,topic,topic,level,level\n1,a,1,t,t,t,1,1\n"

    error = _preview_error(Source.from_bytes(content, name="x.csv"))

    assert str(error) == (
        "line 1, field 'id': the column appears twice; so do 'topic' and 'level'"
    )


def test_records_with_more_fields_than_the_limit_are_refused(settings) -> None:
    settings.EVALSITE_MAX_COLUMNS = 10
    rows = [{"input": "a", **{f"f{n}": n}} for n in range(12)]
    content = "\n".join(json.dumps(row) for row in rows).encode()

    error = _preview_error(Source.from_bytes(content, name="x.jsonl"))

    assert str(error) == (
        "line 10: the records have more than 10 different fields (EVALSITE_MAX_COLUMNS)"
    )


# -- JSON arrays ----------------------------------------------------------------------


def test_a_json_array_stops_at_the_first_bad_record_unread() -> None:
    content = b"[" + b"0," * (4 * MB) + b"0]"  # 8 MB of records that are no objects
    source, opened = _counted(content, "x.json")

    error = _preview_error(source)

    assert str(error) == "record 1 (line 1): expected an object, got a number"
    assert max(file.bytes_read for file in opened) < 256 * 1024


def test_a_json_array_record_over_the_text_limit_is_refused_unread(settings) -> None:
    settings.EVALSITE_MAX_ITEM_BYTES = 2048  # at most 16,384 bytes of text
    record = b'{"input": "' + b"a" * (4 * MB) + b'"}'
    source, opened = _counted(b'[{"input": "b"},\n' + record + b"]", "x.json")

    error = _preview_error(source)

    assert str(error) == (
        "line 2: a record takes more than 16,384 bytes of text; an item may take "
        "at most 2,048 (EVALSITE_MAX_ITEM_BYTES)"
    )
    assert max(file.bytes_read for file in opened) < 256 * 1024


def test_a_json_line_over_the_text_limit_is_refused_unread(settings) -> None:
    settings.EVALSITE_MAX_ITEM_BYTES = 2048
    content = b'{"input": "b"}\n{"input": "' + b"a" * (4 * MB) + b'"}\n'
    source, opened = _counted(content, "x.jsonl")

    error = _preview_error(source)

    assert error.line == 2
    assert "a record takes more than 16,384 bytes of text" in error.message
    assert max(file.bytes_read for file in opened) < 256 * 1024


# -- YAML -----------------------------------------------------------------------------


def test_yaml_over_the_yaml_limit_is_refused_suggesting_json_lines(settings) -> None:
    settings.EVALSITE_MAX_YAML_BYTES = 1024
    content = b"".join(b"- {input: question %d}\n" % n for n in range(100))
    assert len(content) > 1024

    error = _preview_error(Source.from_bytes(content, name="x.yaml"))

    assert error.field == "file"
    assert error.message == (
        "the YAML file has more than 1,024 bytes, the limit for YAML "
        "(EVALSITE_MAX_YAML_BYTES); save larger datasets as JSON Lines "
        "(one JSON object per line), which may be larger"
    )


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
def test_yaml_is_parsed_by_libyaml_when_pyyaml_has_it() -> None:
    from runs.datasets.importers import yaml_records

    assert issubclass(yaml_records._YamlLoader, yaml.cyaml.CParser)
    preview = preview_file(
        source=Source.from_bytes(b"- {input: a}\n- {input: b}\n", name="x.yaml")
    )
    assert preview.rows == [{"input": "a"}, {"input": "b"}]


# -- time -----------------------------------------------------------------------------


@pytest.mark.parametrize("filename", ["x.jsonl", "x.json", "x.csv", "x.yaml"])
def test_reading_a_file_stops_when_its_time_is_up(settings, filename: str) -> None:
    settings.EVALSITE_MAX_PARSE_SECONDS = 0
    content = {
        "x.jsonl": b'{"input": "a"}\n{"input": "b"}\n',
        "x.json": b'[{"input": "a"}, {"input": "b"}]',
        "x.csv": b"input\na\nb\n",
        "x.yaml": b"- input: a\n- input: b\n",
    }[filename]

    with pytest.raises(InvalidInput) as info:
        parse_items(content=content, filename=filename, fields=NO_EXPECTED)

    assert info.value.message == (
        "the file took more than 0 s of CPU to read (EVALSITE_MAX_PARSE_SECONDS); "
        "split it into smaller files"
    )


def test_a_yaml_parse_stops_when_its_time_is_up_before_reaching_the_end(
    settings,
) -> None:
    settings.EVALSITE_MAX_PARSE_SECONDS = 0
    content = b"".join(b"- {input: question %d}\n" % n for n in range(3000))

    with pytest.raises(InvalidInput) as info:
        parse_items(content=content, filename="x.yaml", fields=NO_EXPECTED)

    assert "took more than 0 s of CPU to read" in info.value.message
    # Stopped while the document was parsed, not at its first record.
    assert not isinstance(info.value, InvalidRecord)
    assert info.value.line is not None and 1 < info.value.line < 3000


def test_a_busy_machine_does_not_refuse_a_file_it_can_read(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Other processes on the cores: the wall clock runs a minute for each
    # record while the read itself takes a few microseconds of CPU.
    settings.EVALSITE_MAX_PARSE_SECONDS = 30
    wall = iter(range(0, 10**6, 60))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(wall)))
    content = b"".join(b'{"input": "q%d"}\n' % n for n in range(20))

    parsed = parse_items(content=content, filename="x.jsonl", fields=NO_EXPECTED)

    assert len(parsed.rows) == 20

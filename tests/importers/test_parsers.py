"""Hostile and malformed files: each is refused with a clear error naming its line,
quickly and without storing anything."""

from __future__ import annotations

import csv
import json
import tracemalloc
from pathlib import Path

import pytest

from runs.datasets.importers import FieldMap, Source, dataset_import, parse_items
from runs.errors import InvalidInput
from runs.models import Dataset, Item, Project

NO_EXPECTED = FieldMap(expected=None)


def _refused(project: Project, content: bytes, filename: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        dataset_import(
            project=project,
            user=None,
            name="hostile",
            content=content,
            filename=filename,
            expected_field=None,
        )
    assert Dataset.all_objects.count() == 0
    assert Item.objects.count() == 0
    return info.value


def _laughs(levels: int, width: int = 9) -> bytes:
    """A "billion laughs" list: each anchor repeats the previous one ``width`` times."""
    lines = ["- input: x", "  laughs:", '    a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"    a{level}: &a{level} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


# -- YAML -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_yaml_alias_expansion_is_refused_naming_the_line(project: Project) -> None:
    # Under 500 bytes that would expand to an item of 30 MB.
    content = _laughs(7)
    assert len(content) < 500

    error = _refused(project, content, "x.yaml")

    assert "aliases would repeat more than 1,048,576 bytes" in str(error)
    assert error.line is not None and 3 < error.line <= 11


def test_billion_laughs_is_refused_without_expanding_it() -> None:
    content = _laughs(10)  # 9**10 "lol"s, were it expanded
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput, match="aliases would repeat"):
            parse_items(content=content, filename="x.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 5 * 1024 * 1024


@pytest.mark.django_db
def test_a_few_yaml_aliases_are_fine(project: Project) -> None:
    content = (
        b"- &base {input: a, topic: sums, level: 1}\n"
        b"- {<<: *base, input: b}\n"
        b"- {<<: *base, input: c, level: 2}\n"
    )

    dataset = dataset_import(
        project=project,
        user=None,
        name="aliases",
        content=content,
        filename="x.yaml",
        expected_field=None,
    )

    assert list(dataset.items.values_list("input", "metadata")) == [
        ("a", {"topic": "sums", "level": 1}),
        ("b", {"topic": "sums", "level": 1}),
        ("c", {"topic": "sums", "level": 2}),
    ]


@pytest.mark.django_db
def test_deep_yaml_is_refused_naming_the_line(project: Project) -> None:
    content = b"- input: a\n- input: " + b"[" * 10_000 + b"]" * 10_000 + b"\n"

    error = _refused(project, content, "x.yaml")

    assert (error.line, error.message) == (2, "values nest deeper than 100 levels")


@pytest.mark.django_db
def test_deep_nesting_through_aliases_is_refused(project: Project) -> None:
    deep = "[" * 60 + "x" + "]" * 60
    content = f"- input: &deep {deep}\n- input: [[[[[[*deep]]]]]]\n".encode()
    content = content.replace(b"[[[[[[*deep]]]]]]", b"[" * 50 + b"*deep" + b"]" * 50)

    error = _refused(project, content, "x.yaml")

    assert error.line == 2
    assert "through the alias *deep" in error.message


@pytest.mark.django_db
def test_a_yaml_alias_to_its_own_value_is_refused(project: Project) -> None:
    error = _refused(project, b"- input: a\n- &a {input: [*a]}\n", "x.yaml")

    assert error.line == 2
    assert "refers to a value that contains it" in error.message


@pytest.mark.django_db
def test_yaml_number_too_long_for_python_names_the_line(project: Project) -> None:
    content = b"- input: a\n- input: " + b"1" * 5000 + b"\n"

    error = _refused(project, content, "x.yaml")

    assert error.line == 2
    assert "a number has more than 4300 digits" in error.message


# -- JSON -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_deep_json_array_names_the_line(project: Project) -> None:
    content = (
        b'[\n{"input": "a"},\n{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]"
    )

    error = _refused(project, content, "x.json")

    assert (error.line, error.message) == (3, "invalid JSON: nested too deeply")


@pytest.mark.django_db
def test_deep_json_line_names_the_line(project: Project) -> None:
    content = b'{"input": "a"}\n{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"

    assert _refused(project, content, "x.jsonl").line == 2


@pytest.mark.django_db
@pytest.mark.parametrize("filename", ["x.jsonl", "x.json"])
def test_json_number_too_long_for_python_names_the_line(
    project: Project, filename: str
) -> None:
    rows = [b'{"input": "a"}', b'{"input": ' + b"7" * 5000 + b"}"]
    content = (
        b"\n".join(rows)
        if filename == "x.jsonl"
        else b"[\n" + b",\n".join(rows) + b"\n]"
    )

    error = _refused(project, content, filename)

    assert error.line == (2 if filename == "x.jsonl" else 3)
    assert "a number has more than 4300 digits" in error.message


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "filename"),
    [
        (b'{"input": "a"}\n{"input": "\\ud800"}\n', "x.jsonl"),
        (b'- input: a\n- input: "\\ud800"\n', "x.yaml"),
    ],
)
def test_unpaired_surrogates_are_refused_naming_the_line(
    project: Project, content: bytes, filename: str
) -> None:
    error = _refused(project, content, filename)

    assert error.line == 2
    # libyaml refuses the escape itself, PyYAML's own parser leaves it to us.
    assert any(
        reason in error.message
        for reason in ("unpaired surrogate", "invalid Unicode character escape")
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "filename"),
    [
        (b'{"input": "a"}\n{"input": "a\\u0000b"}\n', "x.jsonl"),
        (b'{"input": "a"}\n{"input": "a", "k\\u0000": 1}\n', "x.jsonl"),
        (b"id,input\n1,a\n2,a\x00b\n", "x.csv"),
    ],
)
def test_nul_characters_are_refused_naming_the_line(
    project: Project, content: bytes, filename: str
) -> None:
    error = _refused(project, content, filename)

    assert error.line == (3 if filename == "x.csv" else 2)
    assert "NUL character" in error.message


@pytest.mark.django_db
def test_an_escaped_backslash_before_u0000_is_no_nul(project: Project) -> None:
    content = json.dumps({"input": "C:\\u0000"}).encode()

    dataset = dataset_import(
        project=project,
        user=None,
        name="paths",
        content=content,
        filename="x.jsonl",
        expected_field=None,
    )

    assert dataset.items.get().input == "C:\\u0000"


@pytest.mark.django_db
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_invalid_utf8_in_a_json_document_names_the_line(
    project: Project, bom: bytes
) -> None:
    content = bom + b'[\n{"input": "a"},\n{"input": "caf\xe9\n"}\n]'

    error = _refused(project, content, "x.json")

    assert (error.line, error.message) == (
        3,
        "the file is not valid UTF-8 (byte 0xe9)",
    )


# -- size of one item -----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("filename", ["x.jsonl", "x.csv", "x.yaml"])
def test_an_item_over_the_size_limit_is_refused_naming_the_line(
    project: Project, settings, filename: str
) -> None:
    settings.EVALSITE_MAX_ITEM_BYTES = 2048
    big = "x" * 3000
    content = {
        "x.jsonl": f'{{"input": "a"}}\n{{"input": "{big}"}}\n',
        "x.csv": f"input\na\n{big}\n",
        "x.yaml": f"- input: a\n- input: {big}\n",
    }[filename].encode()

    error = _refused(project, content, filename)

    assert error.line == (3 if filename == "x.csv" else 2)
    assert "bytes as JSON; the limit is 2,048 (EVALSITE_MAX_ITEM_BYTES)" in str(error)


@pytest.mark.django_db
def test_a_csv_cell_larger_than_pythons_default_limit_is_fine(project: Project) -> None:
    big = "y" * 200_000  # csv's own default limit is 131,072 characters
    content = f"id,input\n1,{big}\n".encode()

    dataset = dataset_import(
        project=project,
        user=None,
        name="long",
        content=content,
        filename="x.csv",
        expected_field=None,
    )

    assert dataset.items.get().input == big


@pytest.mark.django_db
def test_a_csv_cell_larger_than_the_reader_takes_names_its_row(
    project: Project,
) -> None:
    parse_items(content=b"input\na\n", filename="x.csv", fields=NO_EXPECTED)
    cell = b"z\n" * (csv.field_size_limit() // 2 + 1)  # the limit is process-wide
    content = b'id,input\n1,a\n2,"' + cell + b'"\n'

    error = _refused(project, content, "x.csv")

    assert error.line == 3
    assert error.message == (
        f"a cell is larger than {csv.field_size_limit():,} characters"
    )


# -- CSV quoting and shape ------------------------------------------------------------


@pytest.mark.django_db
def test_csv_unclosed_quote_is_an_error_naming_the_line_it_opens(
    project: Project,
) -> None:
    content = b'id,input\n1,first\n2,"second\n3,third\n4,fourth\n'

    error = _refused(project, content, "x.csv")

    assert str(error) == "line 3: a quoted cell that starts in this row is never closed"


@pytest.mark.django_db
def test_csv_text_after_a_closing_quote_is_an_error(project: Project) -> None:
    error = _refused(project, b'id,input\n1,"a"b\n', "x.csv")

    assert error.line == 2
    assert "a quoted cell must end at a comma" in error.message


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("row", "cells"), [(b"2,b,extra", 3), (b"2", 1), (b'2,"b",""', 3)]
)
def test_csv_rows_with_another_number_of_cells_name_the_line(
    project: Project, row: bytes, cells: int
) -> None:
    content = b"id,input\n1,a\n" + row + b"\n3,c\n"

    error = _refused(project, content, "x.csv")

    assert str(error) == f"line 3: expected 2 cells as in the header, got {cells}"


# -- memory -----------------------------------------------------------------------


@pytest.mark.parametrize("filename", ["x.jsonl", "x.csv"])
def test_lines_are_read_from_the_file_one_at_a_time(
    tmp_path: Path, filename: str
) -> None:
    path = tmp_path / filename
    with path.open("w") as out:
        if filename == "x.csv":
            out.write("id,input,expected\n")
        for n in range(500):
            text = f"question {n} " + "x" * 4000
            if filename == "x.csv":
                out.write(f"q{n},{text},{n}\n")
            else:
                out.write(json.dumps({"id": f"q{n}", "input": text, "expected": n}))
                out.write("\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        parsed = parse_items(source=Source.from_path(path))
        rows = sum(1 for _ in parsed.read_rows())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert (parsed.count, rows) == (500, 500)
    assert peak < size / 4, (peak, size)  # the file is about 2 MB

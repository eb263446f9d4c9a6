from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from runs.datasets.importers import (
    Source,
    dataset_create_from_items,
    dataset_find_by_hash,
    dataset_import,
    parse_items,
)
from runs.errors import Forbidden, InvalidInput, NotFound
from runs.models import Dataset, Item, Project

JSONL = (
    b'{"id": "a", "input": "2+2?", "expected": "4", "topic": "add"}\n'
    b'{"id": "b", "input": "3*3?", "expected": "9", "topic": "mul"}\n'
)
CSV = b"id,input,expected,topic\na,2+2?,4,add\nb,3*3?,9,mul\n"
JSON = json.dumps(
    [
        {"id": "a", "input": "2+2?", "expected": "4", "topic": "add"},
        {"id": "b", "input": "3*3?", "expected": "9", "topic": "mul"},
    ]
).encode()
YAML = b"""\
- id: a
  input: 2+2?
  expected: "4"
  topic: add
- id: b
  input: 3*3?
  expected: "9"
  topic: mul
"""
SAME_CONTENT = {"x.jsonl": JSONL, "x.csv": CSV, "x.json": JSON, "x.yaml": YAML}
EXPECTED_ROWS = [
    ("a", "2+2?", "4", {"topic": "add"}),
    ("b", "3*3?", "9", {"topic": "mul"}),
]


def _import(
    project: Project, content: bytes | str, filename: str, **kw: Any
) -> Dataset:
    return dataset_import(
        project=project,
        user=None,
        name=kw.pop("name", "qa"),
        content=content,
        filename=filename,
        **kw,
    )


def _stored_rows(dataset: Dataset) -> list[tuple[Any, ...]]:
    return list(
        dataset.items.order_by("index").values_list(
            "external_id", "input", "expected", "metadata"
        )
    )


def _assert_nothing_stored() -> None:
    assert Dataset.all_objects.count() == 0
    assert Item.objects.count() == 0


def _error(project: Project, content: bytes | str, filename: str, **kw: Any) -> str:
    kw.setdefault("expected_field", None)
    with pytest.raises(InvalidInput) as info:
        _import(project, content, filename, **kw)
    _assert_nothing_stored()
    return str(info.value)


# -- each format, default and custom field mappings ----------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("filename", list(SAME_CONTENT))
def test_each_format_imports_with_default_fields(
    project: Project, filename: str
) -> None:
    dataset = _import(project, SAME_CONTENT[filename], filename)

    dataset.refresh_from_db()
    assert _stored_rows(dataset) == EXPECTED_ROWS
    assert list(dataset.items.values_list("index", flat=True)) == [0, 1]
    assert dataset.item_count == 2
    assert dataset.version == 1
    assert dataset.source_format == filename.rsplit(".", 1)[1]
    assert dataset.source_name == filename


CUSTOM = {
    "x.jsonl": (
        b'{"qid": 7, "question": "hi", "answer": "yo", "input": "meta"}\n'
        b'{"qid": 8, "question": "bye"}\n'
    ),
    "x.csv": b"qid,question,answer,input\n7,hi,yo,meta\n8,bye,,\n",
    "x.json": b'[{"qid": 7, "question": "hi", "answer": "yo", "input": "meta"},'
    b' {"qid": 8, "question": "bye"}]',
    "x.yaml": b"- {qid: 7, question: hi, answer: yo, input: meta}\n"
    b"- {qid: 8, question: bye}\n",
}


@pytest.mark.django_db
@pytest.mark.parametrize("filename", list(CUSTOM))
def test_each_format_imports_with_custom_fields(
    project: Project, filename: str
) -> None:
    dataset = _import(
        project,
        CUSTOM[filename],
        filename,
        id_field="qid",
        input_field="question",
        expected_field="answer",
    )

    assert _stored_rows(dataset) == [
        ("7", "hi", "yo", {"input": "meta"}),
        ("8", "bye", None, {}),
    ]


@pytest.mark.django_db
def test_fields_other_than_id_input_expected_go_to_metadata(project: Project) -> None:
    line = {"id": "1", "input": {"messages": []}, "tags": ["x"], "meta": {"k": 1}}
    dataset = _import(project, json.dumps(line), "x.jsonl", expected_field=None)

    item = dataset.items.get()
    assert item.input == {"messages": []}
    assert item.expected is None
    assert item.metadata == {"tags": ["x"], "meta": {"k": 1}}


@pytest.mark.django_db
def test_csv_values_stay_strings(project: Project) -> None:
    dataset = _import(project, b"id,input,expected,n\n1,42,true,3.5\n", "x.csv")

    item = dataset.items.get()
    assert (item.external_id, item.input, item.expected) == ("1", "42", "true")
    assert item.metadata == {"n": "3.5"}


@pytest.mark.django_db
def test_csv_quoted_cells_may_hold_commas_and_newlines(project: Project) -> None:
    content = b'id,input\n1,"a, b"\n2,"line one\nline two"\n'
    dataset = _import(project, content, "x.csv", expected_field=None)

    assert list(dataset.items.values_list("input", flat=True)) == [
        "a, b",
        "line one\nline two",
    ]


@pytest.mark.django_db
def test_yaml_dates_stay_strings(project: Project) -> None:
    dataset = _import(project, b"- input: which day\n  expected: 2024-02-29\n", "x.yml")

    assert dataset.items.get().expected == "2024-02-29"


@pytest.mark.django_db
def test_byte_order_mark_is_ignored(project: Project) -> None:
    dataset = _import(project, b"\xef\xbb\xbf" + CSV, "x.csv")

    assert _stored_rows(dataset) == EXPECTED_ROWS


@pytest.mark.django_db
def test_format_argument_overrides_the_extension(project: Project) -> None:
    dataset = _import(project, CSV, "export.txt", format="csv")

    assert dataset.source_format == "csv"
    assert dataset.item_count == 2


@pytest.mark.django_db
def test_ids_are_numbered_when_no_item_has_one(project: Project) -> None:
    dataset = _import(
        project, b'{"input": "a"}\n\n{"input": "b"}\n', "x.jsonl", expected_field=None
    )

    assert list(dataset.items.values_list("external_id", flat=True)) == ["1", "2"]


@pytest.mark.django_db
def test_more_than_one_batch_is_stored(project: Project) -> None:
    lines = "\n".join(json.dumps({"input": f"q{n}"}) for n in range(2500))
    dataset = _import(project, lines, "x.jsonl", expected_field=None)

    assert dataset.item_count == 2500
    assert dataset.items.count() == 2500
    assert dataset.items.get(index=2499).external_id == "2500"


def test_parse_items_needs_no_database() -> None:
    parsed = parse_items(content=JSONL, filename="x.jsonl")

    assert [row.external_id for row in parsed.rows] == ["a", "b"]
    assert parsed.format == "jsonl"
    assert len(parsed.content_hash) == 64


# -- errors name the line or record, and store nothing ------------------------------


@pytest.mark.django_db
def test_invalid_json_names_the_line_and_the_decoder_message(project: Project) -> None:
    content = b'{"input": "a"}\n{"input": "b"}\n{"input": }\n{"input": "d"}\n'

    message = _error(project, content, "x.jsonl")

    assert message == "line 3: invalid JSON: Expecting value (column 11)"


@pytest.mark.django_db
def test_invalid_json_array_names_the_line(project: Project) -> None:
    message = _error(project, b'[\n{"input": "a"},\n{"input": }\n]', "x.json")

    assert message.startswith("line 3:")


@pytest.mark.django_db
def test_missing_input_names_the_line_and_the_field(project: Project) -> None:
    content = b'{"input": "a"}\n{"question": "b"}\n'

    with pytest.raises(InvalidInput) as info:
        _import(project, content, "x.jsonl")

    assert (info.value.line, info.value.field) == (2, "input")
    assert str(info.value) == "line 2, field 'input': the input field is missing"
    _assert_nothing_stored()


@pytest.mark.django_db
def test_null_input_is_an_error(project: Project) -> None:
    message = _error(project, b'{"input": null}\n', "x.jsonl")

    assert message == "line 1, field 'input': the input must not be null"


@pytest.mark.django_db
def test_id_missing_on_some_lines_names_the_line(project: Project) -> None:
    content = b'{"id": "a", "input": "1"}\n{"input": "2"}\n'

    message = _error(project, content, "x.jsonl")

    assert message.startswith("line 2, field 'id':")


@pytest.mark.django_db
def test_duplicate_ids_name_both_lines(project: Project) -> None:
    content = (
        b'{"id": "a", "input": "1"}\n'
        b'{"id": "b", "input": "2"}\n'
        b'{"id": "a", "input": "3"}\n'
    )

    message = _error(project, content, "x.jsonl")

    assert message == "line 3, field 'id': duplicate id 'a', first used on line 1"


@pytest.mark.django_db
def test_ids_that_are_not_strings_or_integers_are_errors(project: Project) -> None:
    message = _error(project, b'{"id": [1], "input": "a"}\n', "x.jsonl")

    assert "must be a string or an integer, not an array" in message


@pytest.mark.django_db
def test_a_line_that_is_not_an_object_is_an_error(project: Project) -> None:
    message = _error(project, b'{"input": "a"}\n[1, 2]\n', "x.jsonl")

    assert message == "line 2: expected an object, got an array"


@pytest.mark.django_db
def test_nan_is_refused(project: Project) -> None:
    message = _error(project, b'{"input": "a"}\n{"input": NaN}\n', "x.jsonl")

    assert message.startswith("line 2: cannot be stored as JSON")


@pytest.mark.django_db
def test_csv_errors_count_the_header_as_line_one(project: Project) -> None:
    content = b"id,input\n1,a\n2\n"

    message = _error(project, content, "x.csv")

    assert message == "line 3: expected 2 cells as in the header, got 1"


@pytest.mark.django_db
def test_csv_line_numbers_follow_multiline_cells(project: Project) -> None:
    content = b'id,input\n1,"two\nlines"\n1,b\n'

    message = _error(project, content, "x.csv")

    assert message == "line 4, field 'id': duplicate id '1', first used on line 2"


@pytest.mark.django_db
def test_csv_missing_input_column_names_the_first_row(project: Project) -> None:
    message = _error(project, b"id,question\n1,a\n", "x.csv")

    assert message == "line 2, field 'input': the input field is missing"


@pytest.mark.django_db
def test_csv_empty_input_cell_is_a_missing_input(project: Project) -> None:
    message = _error(project, b"id,input\n1,a\n2,\n", "x.csv")

    assert message == "line 3, field 'input': the input field is missing"


@pytest.mark.django_db
def test_csv_duplicate_column_is_an_error(project: Project) -> None:
    message = _error(project, b"id,input,id\n1,a,2\n", "x.csv")

    assert message == "line 1, field 'id': the column appears twice"


@pytest.mark.django_db
def test_yaml_errors_name_the_record(project: Project) -> None:
    content = b"- {input: a}\n- {input: b}\n- {question: c}\n"

    with pytest.raises(InvalidInput) as info:
        _import(project, content, "x.yaml")

    assert str(info.value) == (
        "record 3 (line 3), field 'input': the input field is missing"
    )
    assert info.value.as_dict()["record"] == 3
    assert info.value.as_dict()["line"] == 3
    _assert_nothing_stored()


@pytest.mark.django_db
def test_invalid_yaml_names_the_line(project: Project) -> None:
    message = _error(project, b"- input: a\n- input: [b\n- input: c\n", "x.yaml")

    assert message.startswith("line ")
    assert "invalid YAML" in message


@pytest.mark.django_db
def test_json_record_that_is_not_an_object_names_the_record(project: Project) -> None:
    message = _error(project, b'[{"input": "a"}, "b"]', "x.json")

    assert message == "record 2 (line 1): expected an object, got a string"


@pytest.mark.django_db
def test_json_that_is_not_an_array_is_an_error(project: Project) -> None:
    message = _error(project, b'{"input": "a"}', "x.json")

    assert message == "expected a JSON array of objects, got an object"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "filename"),
    [
        (b"", "x.jsonl"),
        (b"\n  \n", "x.jsonl"),
        (b"id,input\n", "x.csv"),
        (b"[]", "x.json"),
        (b"# nothing\n", "x.yaml"),
    ],
)
def test_a_file_without_items_is_an_error(
    project: Project, content: bytes, filename: str
) -> None:
    assert _error(project, content, filename) == "the file has no items"


@pytest.mark.django_db
def test_undecodable_utf8_names_the_line(project: Project) -> None:
    content = b'{"input": "a"}\n{"input": "caf\xe9"}\n'

    message = _error(project, content, "x.jsonl")

    assert message == "line 2: the file is not valid UTF-8 (byte 0xe9)"


@pytest.mark.django_db
def test_unknown_extension_asks_for_a_format(project: Project) -> None:
    with pytest.raises(InvalidInput) as info:
        _import(project, JSONL, "x.txt")

    assert info.value.field == "format"
    assert "cannot tell the format" in str(info.value)


@pytest.mark.django_db
def test_unknown_format_is_an_error(project: Project) -> None:
    with pytest.raises(InvalidInput) as info:
        _import(project, JSONL, "x.jsonl", format="parquet")

    assert info.value.field == "format"


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["", "   ", "n" * 201])
def test_dataset_name_is_required_and_bounded(project: Project, name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _import(project, JSONL, "x.jsonl", name=name)

    assert info.value.field == "name"
    _assert_nothing_stored()


# -- versions and hashes --------------------------------------------------------


@pytest.mark.django_db
def test_same_name_again_makes_version_two(project: Project) -> None:
    first = _import(project, JSONL, "x.jsonl")
    second = _import(project, CSV, "x.csv")

    assert (first.version, second.version) == (1, 2)
    assert Item.objects.count() == 4


@pytest.mark.django_db
def test_versions_count_per_project(project: Project, other_project: Project) -> None:
    _import(project, JSONL, "x.jsonl")

    assert _import(other_project, JSONL, "x.jsonl").version == 1


def test_same_content_in_every_format_hashes_the_same() -> None:
    hashes = {
        parse_items(content=content, filename=filename).content_hash
        for filename, content in SAME_CONTENT.items()
    }

    assert len(hashes) == 1


def test_different_content_hashes_differently() -> None:
    changed = JSONL.replace(b'"9"', b'"10"')

    assert (
        parse_items(content=JSONL, filename="x.jsonl").content_hash
        != parse_items(content=changed, filename="x.jsonl").content_hash
    )


@pytest.mark.django_db
def test_reuse_identical_returns_the_existing_dataset(project: Project) -> None:
    first = _import(project, JSONL, "x.jsonl")

    again = _import(project, CSV, "x.csv", reuse_identical=True)

    assert again.pk == first.pk
    assert Dataset.objects.count() == 1
    assert Item.objects.count() == 2


@pytest.mark.django_db
def test_reuse_identical_with_new_content_makes_a_new_version(
    project: Project,
) -> None:
    _import(project, JSONL, "x.jsonl")

    changed = _import(
        project,
        b'{"input": "new", "expected": "old"}',
        "x.jsonl",
        reuse_identical=True,
    )

    assert changed.version == 2


@pytest.mark.django_db
def test_find_by_hash_returns_the_matching_version(project: Project) -> None:
    first = _import(project, JSONL, "x.jsonl")
    _import(project, b'{"input": "new"}', "x.jsonl", expected_field=None)

    found = dataset_find_by_hash(
        project=project, name="qa", content_hash=first.content_hash
    )

    assert found == first
    assert (
        dataset_find_by_hash(
            project=project, name="other", content_hash=first.content_hash
        )
        is None
    )


@pytest.mark.django_db
def test_a_version_taken_by_a_concurrent_import_is_retried(project: Project) -> None:
    raced = False

    # Another process stores version 1 right after we read the latest version,
    # as a concurrent upload of the same name would.
    def race(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal raced
        result = execute(sql, params, many, context)
        if not raced and "MAX" in sql and "runs_dataset" in sql:
            raced = True
            Dataset.objects.create(project=project, name="qa", version=1)
        return result

    with connection.execute_wrapper(race):
        dataset = _import(project, JSONL, "x.jsonl")

    assert raced
    assert dataset.version == 2
    assert sorted(Dataset.objects.values_list("version", flat=True)) == [1, 2]
    assert dataset.items.count() == 2


# -- HumanEval ---------------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the import tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.django_db
@pytest.mark.usefixtures("no_network")
def test_humaneval_loads_164_items_offline(project: Project) -> None:
    dataset = _import(project, b"", "", name="humaneval", format="humaneval")

    assert dataset.item_count == 164
    assert dataset.items.count() == 164
    first = dataset.items.get(index=0)
    assert first.external_id == "HumanEval/0"
    assert first.input.startswith("from typing import List")
    assert "return False" in first.expected
    assert first.metadata["entry_point"] == "has_close_elements"
    assert "def check(candidate)" in first.metadata["test"]
    assert set(first.metadata) == {"entry_point", "test"}


# -- items from the API ------------------------------------------------------------


@pytest.mark.django_db
def test_create_from_items_stores_them(project: Project, bob: User) -> None:
    items = [{"id": "a", "input": "1", "expected": "2", "level": 3}]

    dataset = dataset_create_from_items(
        project=project, user=bob, name="api", items=items
    )

    assert _stored_rows(dataset) == [("a", "1", "2", {"level": 3})]
    assert dataset.created_by == bob


@pytest.mark.django_db
def test_create_from_items_names_the_record(project: Project) -> None:
    items = [{"input": "1"}, {"input": "2"}, {"question": "3"}]

    with pytest.raises(InvalidInput) as info:
        dataset_create_from_items(project=project, user=None, name="api", items=items)

    assert str(info.value) == "record 3, field 'input': the input field is missing"
    _assert_nothing_stored()


@pytest.mark.django_db
def test_field_mapping_must_name_distinct_fields(project: Project) -> None:
    with pytest.raises(InvalidInput) as info:
        dataset_create_from_items(
            project=project,
            user=None,
            name="api",
            items=[{"q": "1"}],
            id_field="q",
            input_field="q",
        )

    assert info.value.field == "input_field"
    _assert_nothing_stored()


@pytest.mark.django_db
def test_create_from_items_refuses_an_empty_list(project: Project) -> None:
    with pytest.raises(InvalidInput, match="no items"):
        dataset_create_from_items(project=project, user=None, name="api", items=[])


# -- who may import ----------------------------------------------------------------


@pytest.mark.django_db
def test_editor_may_import(project: Project, bob: User) -> None:
    dataset = dataset_import(
        project=project, user=bob, name="qa", content=JSONL, filename="x.jsonl"
    )

    assert dataset.created_by == bob


@pytest.mark.django_db
def test_viewer_may_not_import(project: Project, victor: User) -> None:
    with pytest.raises(Forbidden):
        dataset_import(
            project=project, user=victor, name="qa", content=JSONL, filename="x.jsonl"
        )
    _assert_nothing_stored()


@pytest.mark.django_db
def test_outsider_gets_not_found(
    project: Project, mallory: User, other_project: Project
) -> None:
    with pytest.raises(NotFound):
        dataset_create_from_items(
            project=project, user=mallory, name="qa", items=[{"input": "x"}]
        )
    _assert_nothing_stored()


def test_an_upload_over_the_size_limit_is_refused_before_reading(settings) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.EVALSITE_MAX_DATASET_BYTES = 1024
    upload = SimpleUploadedFile("big.jsonl", b"x" * 2048)
    with pytest.raises(InvalidInput, match="2,048 bytes; the limit is 1,024") as info:
        parse_items(source=Source.from_upload(upload))
    assert info.value.field == "file"

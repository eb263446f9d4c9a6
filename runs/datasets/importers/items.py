"""From records to items: the field mapping, validation, hashing and the preview.

Nothing here touches the database. Records are read lazily, once to validate,
count and hash them, and once more when they are stored, so that memory does
not grow with the number of items (beyond 8 bytes an item, a hash of its id).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings

from runs.datasets.importers.parsers import Records, Where, kind_of
from runs.errors import InvalidInput

ID_MAX_LENGTH = 255
EXPECTED_FIELD_MAX_LENGTH = 255  # Dataset.expected_field
PREVIEW_ROWS = 10
# Guesses for the preview, best first; compared without regard to case.
ID_NAMES = ("id", "task_id", "uid", "qid", "question_id", "problem_id", "idx")
INPUT_NAMES = ("input", "question", "prompt", "problem", "text", "query", "messages")
EXPECTED_NAMES = (
    "expected",
    "answer",
    "target",
    "label",
    "output",
    "solution",
    "expected_output",
    "reference",
    "ground_truth",
    "gold",
    "canonical_solution",
)


@dataclass(frozen=True)
class FieldMap:
    """Which source fields hold the id, the input and the expected answer.

    An empty ``id`` numbers the items 1, 2, 3...; ``expected`` is None when
    the items have no expected answer.
    """

    id: str = "id"
    input: str = "input"
    expected: str | None = "expected"

    @classmethod
    def of(
        cls, *, id_field: str, input_field: str, expected_field: str | None
    ) -> FieldMap:
        # The dataset keeps the expected answer's field name.
        if expected_field and len(expected_field) > EXPECTED_FIELD_MAX_LENGTH:
            raise InvalidInput(
                f"must be at most {EXPECTED_FIELD_MAX_LENGTH} characters",
                field="expected_field",
            )
        return cls(id=id_field, input=input_field, expected=expected_field or None)

    def validate(self) -> None:
        if not self.input.strip():
            raise InvalidInput("must not be empty", field="input_field")
        names = [name for name in (self.id, self.input, self.expected) if name]
        if len(set(names)) < len(names):
            raise InvalidInput(
                "the id, input and expected fields must differ", field="input_field"
            )

    def as_dict(self) -> dict[str, str | None]:
        return {"id": self.id, "input": self.input, "expected": self.expected}


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
    """A validated file: its counts and hash, and its rows, read again on demand."""

    format: str
    count: int
    content_hash: str
    fields: dict[str, int]
    expected_count: int
    field_map: FieldMap
    read_rows: Callable[[], Iterator[ItemRow]]

    @property
    def rows(self) -> list[ItemRow]:
        return list(self.read_rows())


@dataclass(frozen=True)
class Preview:
    """What a file holds before it is mapped: its fields and first records."""

    format: str
    count: int
    fields: dict[str, int]
    rows: list[dict[str, Any]]
    guess: FieldMap

    def table(self, *, columns: int = 12, width: int = 80) -> PreviewTable:
        """The first rows as short texts, one column per field (the first few)."""
        names = list(self.fields)[:columns]
        return PreviewTable(
            columns=names,
            rows=[[_cell(row.get(name), width) for name in names] for row in self.rows],
            more_columns=max(0, len(self.fields) - columns),
        )


@dataclass(frozen=True)
class PreviewTable:
    columns: list[str]
    rows: list[list[str]]
    more_columns: int


def _cell(value: Any, width: int) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def normalise(
    records: Callable[[], Records],
    *,
    fields: FieldMap,
    fmt: str,
    empty: str = "the file has no items",
) -> ParsedItems:
    """Validate, count and hash every record; the rows are read again when stored.

    One reading validates, maps and hashes the records, and keeps a 64-bit
    hash of each id rather than the ids themselves. When that cannot give
    the answer a reading that checks first and maps after would (a mapped
    row refused, the first record without the id while others have one, two
    ids with one hash), the records are mapped and hashed again in a second
    reading that keeps every id, which names the first offence exactly.
    """
    first_with_id: Where | None = None
    tally = _Tally()
    ids = array("q")
    exact = True  # every row so far mapped and hashed as the second reading would
    for index, (where, record) in enumerate(records()):
        _check(where, record, fields)
        _count_new_fields(where, record, tally.fields)
        if first_with_id is None and fields.id and fields.id in record:
            first_with_id = where
            # The records before it have no id: numbered, they were mapped wrong.
            exact = exact and index == 0
        if exact:
            try:
                row = _row(index, where, record, fields, first_with_id=first_with_id)
                tally.hash_row(row, where)
                ids.append(hash(row.external_id))
            except InvalidInput:
                exact = False
        if fields.expected and record.get(fields.expected) is not None:
            tally.expected_count += 1
        tally.count += 1
    if not tally.count:
        raise InvalidInput(empty)
    if fields.expected and not tally.expected_count:
        raise _no_expected(fields.expected, tally.fields)

    def read_rows() -> Iterator[ItemRow]:
        for index, (where, record) in enumerate(records()):
            yield _row(index, where, record, fields, first_with_id=first_with_id)

    if not exact or _repeats(ids):
        tally.digest = hashlib.sha256()
        seen: dict[str, Where] = {}
        for index, (where, record) in enumerate(records()):
            row = _row(index, where, record, fields, first_with_id=first_with_id)
            first = seen.setdefault(row.external_id, where)
            if first is not where:
                raise where.error(
                    f"duplicate id {row.external_id!r}, first used on {first}",
                    field=fields.id,
                )
            tally.hash_row(row, where)
    return tally.parsed(fmt=fmt, field_map=fields, read_rows=read_rows)


def _repeats(hashes: array[int]) -> bool:
    """Whether two of the hashes are equal (the same id, or a rare collision)."""
    ordered = np.frombuffer(hashes, dtype=np.int64).copy()
    ordered.sort()
    return bool((ordered[1:] == ordered[:-1]).any())


def parse_rows(
    read_rows: Callable[[], Iterable[ItemRow]],
    *,
    fmt: str,
    empty: str = "there are no items",
) -> ParsedItems:
    """Items already mapped (copied from a dataset): renumbered from 0, checked,
    counted and hashed exactly as an import of the same items would be."""

    def renumbered() -> Iterator[ItemRow]:
        for index, row in enumerate(read_rows()):
            yield dataclasses.replace(row, index=index)

    tally = _Tally()
    for row in renumbered():
        where = Where(record=row.index + 1)
        mapped = {"id": row.external_id, "input": row.input, "expected": row.expected}
        _count_fields({**row.metadata, **mapped}, tally.fields)
        tally.expected_count += row.expected is not None
        tally.hash_row(row, where)
        tally.count += 1
    if not tally.count:
        raise InvalidInput(empty)
    field_map = DEFAULT_FIELDS if tally.expected_count else FieldMap(expected=None)
    return tally.parsed(fmt=fmt, field_map=field_map, read_rows=renumbered)


@dataclass
class _Tally:
    """What a file or list of items adds up to: its counts and content hash.

    The hash is of the mapped rows, so the same items give the same hash
    whatever format they came in.
    """

    count: int = 0
    expected_count: int = 0
    fields: dict[str, int] = dataclasses.field(default_factory=dict)
    digest: Any = dataclasses.field(default_factory=hashlib.sha256)

    def hash_row(self, row: ItemRow, where: Where) -> None:
        self.digest.update(canonical(vars(row), where))
        self.digest.update(b"\n")

    def parsed(
        self,
        *,
        fmt: str,
        field_map: FieldMap,
        read_rows: Callable[[], Iterator[ItemRow]],
    ) -> ParsedItems:
        return ParsedItems(
            format=fmt,
            count=self.count,
            content_hash=self.digest.hexdigest(),
            fields=self.fields,
            expected_count=self.expected_count,
            field_map=field_map,
            read_rows=read_rows,
        )


def preview(records: Callable[[], Records], *, fmt: str) -> Preview:
    """Every record checked to be a storable object; its fields and first rows."""
    counts: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    count = 0
    for where, record in records():
        if not isinstance(record, dict):
            raise where.error(f"expected an object, got {kind_of(record)}")
        canonical(record, where)
        _count_new_fields(where, record, counts)
        if len(rows) < PREVIEW_ROWS:
            rows.append(record)
        count += 1
    if not count:
        raise InvalidInput("the file has no items")
    return Preview(
        format=fmt, count=count, fields=counts, rows=rows, guess=guess_fields(counts)
    )


def guess_fields(names: Iterable[str]) -> FieldMap:
    """The likeliest id, input and expected fields among ``names``."""
    by_lower: dict[str, str] = {}
    for name in names:
        by_lower.setdefault(name.lower(), name)

    def pick(candidates: tuple[str, ...], taken: set[str]) -> str | None:
        for candidate in candidates:
            name = by_lower.get(candidate)
            if name is not None and name not in taken:
                return name
        return None

    id_field = pick(ID_NAMES, set()) or "id"
    expected = pick(EXPECTED_NAMES, {id_field})
    taken = {id_field, expected or ""}
    input_field = pick(INPUT_NAMES, taken) or next(
        (name for name in by_lower.values() if name not in taken), "input"
    )
    return FieldMap(id=id_field, input=input_field, expected=expected)


def describe_fields(counts: dict[str, int], *, limit: int = 20) -> str:
    names = [repr(name) for name in list(counts)[:limit]]
    if len(counts) > limit:
        names.append(f"and {len(counts) - limit} more")
    return ", ".join(names) or "none"


def _no_expected(name: str, counts: dict[str, int]) -> InvalidInput:
    guess = guess_fields(counts).expected
    hint = f" (perhaps {guess!r}?)" if guess and guess != name else ""
    return InvalidInput(
        f"no item has a value for {name!r}; the fields found are "
        f"{describe_fields(counts)}. Name the field that holds the expected "
        f"answer{hint}, or say that the items have none",
        field="expected_field",
    )


def _count_fields(record: dict[Any, Any], counts: dict[str, int]) -> None:
    for key, value in record.items():
        if value is not None:
            name = str(key)
            counts[name] = counts.get(name, 0) + 1


def _count_new_fields(
    where: Where, record: dict[Any, Any], counts: dict[str, int]
) -> None:
    """``_count_fields`` for a file's record: the fields of a file are bounded."""
    _count_fields(record, counts)
    limit = settings.EVALSITE_MAX_COLUMNS
    if len(counts) > limit:
        raise where.error(
            f"the records have more than {limit:,} different fields "
            "(EVALSITE_MAX_COLUMNS)"
        )


def _check(where: Where, record: Any, fields: FieldMap) -> None:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {kind_of(record)}")
    if fields.input not in record:
        raise where.error("the input field is missing", field=fields.input)
    if record[fields.input] is None:
        raise where.error("the input must not be null", field=fields.input)


def _row(
    index: int,
    where: Where,
    record: dict[str, Any],
    fields: FieldMap,
    *,
    first_with_id: Where | None,
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
    mapped = (fields.id, fields.input, fields.expected)
    return ItemRow(
        index=index,
        external_id=external_id,
        input=record[fields.input],
        expected=record.get(fields.expected) if fields.expected else None,
        metadata={key: value for key, value in record.items() if key not in mapped},
    )


def _external_id(where: Where, value: Any, fields: FieldMap) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise where.error(
            f"must be a string or an integer, not {kind_of(value)}", field=fields.id
        )
    external_id = str(value)
    if not external_id.strip():
        raise where.error("must not be empty", field=fields.id)
    if len(external_id) > ID_MAX_LENGTH:
        raise where.error(
            f"must be at most {ID_MAX_LENGTH} characters", field=fields.id
        )
    return external_id


# An escaped NUL: "\u0000" after an even number of backslashes.
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def canonical(value: Any, where: Where) -> bytes:
    """The value as hashed and measured, once known to be storable.

    The same content in any format gives the same bytes. PostgreSQL stores
    neither NaN, NUL characters nor unpaired surrogates, so none is accepted.
    """
    try:
        text = json.dumps(
            value,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise where.error(f"cannot be stored as JSON: {exc}") from None
    try:
        data = text.encode()
    except UnicodeEncodeError:
        raise where.error(
            "holds an unpaired surrogate (\\ud800 to \\udfff), which cannot be stored"
        ) from None
    limit = settings.EVALSITE_MAX_ITEM_BYTES
    if len(data) > limit:
        raise where.error(
            f"the item takes {len(data):,} bytes as JSON; the limit is {limit:,} "
            "(EVALSITE_MAX_ITEM_BYTES)"
        )
    if "\\u0000" in text and _NUL.search(text):
        raise where.error("holds a NUL character (\\u0000), which cannot be stored")
    return data

"""The dataset API's schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, FilterLookup, FilterSchema, Schema

from runs.models import Dataset, Item
from runs.web.schemas import BodyIn, DbId, QueryText

EXPECTED_FIELD_HELP = (
    "the field with the expected answer; empty or null when the items have none. "
    "A named field that no item has is refused, naming the fields found."
)


class DatasetIn(BodyIn):
    project: DbId
    name: str
    # Any, not dict: the importer names the record that is not an object.
    items: list[Any]
    id_field: str = "id"
    input_field: str = "input"
    expected_field: str | None = Field("expected", description=EXPECTED_FIELD_HELP)
    description: str = ""
    reuse_identical: bool = Field(
        False, description="return the latest version when its content is identical"
    )


class DatasetUploadForm(Schema):
    project: DbId
    name: str = Field("", description="default: the file's name without extension")
    format: str | None = Field(
        None,
        description=(
            "jsonl, csv, json, yaml, humaneval, math or gsm8k; default: from "
            "the file name"
        ),
    )
    id_field: str = "id"
    input_field: str = "input"
    expected_field: str | None = Field("expected", description=EXPECTED_FIELD_HELP)
    description: str = ""
    reuse_identical: bool = False


class DatasetPreviewForm(Schema):
    project: DbId = Field(
        description="the project the file is for; previewing needs the editor role"
    )
    format: str | None = Field(
        None,
        description=(
            "jsonl, csv, json, yaml, humaneval, math or gsm8k; default: from "
            "the file name"
        ),
    )


class FieldGuessOut(Schema):
    # The guess is an importers.FieldMap: its id, input and expected.
    id_field: str = Field(validation_alias="id")
    input_field: str = Field(validation_alias="input")
    expected_field: str | None = Field(
        validation_alias="expected",
        description="null when no field looks like an expected answer",
    )


class DatasetPreviewOut(Schema):
    format: str
    count: int = Field(description="how many records the file holds")
    fields: dict[str, int] = Field(
        description="each field, in the order first seen, and how many records "
        "have a (non-null) value for it"
    )
    rows: list[dict[str, Any]] = Field(description="the first records, as parsed")
    guess: FieldGuessOut


class DatasetOut(Schema):
    id: int
    project: int = Field(alias="project_id")
    name: str
    version: int
    description: str
    content_hash: str
    item_count: int
    source_format: str
    source_name: str
    created_at: datetime
    expected_count: int = Field(description="items that have an expected answer")
    expected_field: str = Field(
        description="the source field the expected answers came from; empty if none"
    )
    fields: dict[str, int] = Field(
        description="each source field and how many records have a value for it"
    )

    @staticmethod
    def resolve_fields(obj: Dataset) -> dict[str, int]:
        return obj.field_counts or {}


class DatasetFilter(FilterSchema):
    project: Annotated[DbId | None, FilterLookup("project_id")] = None
    name: Annotated[QueryText | None, FilterLookup("name")] = None


class ItemOut(Schema):
    index: int
    external_id: str
    input: Any
    expected: Any = None
    metadata: dict[str, Any]

    @staticmethod
    def resolve_metadata(obj: Item) -> dict[str, Any]:
        return obj.metadata or {}

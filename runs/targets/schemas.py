"""The target API's schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, FilterLookup, FilterSchema, Schema

from runs.catalogue.schemas import kinds_schema
from runs.targets.services import TARGET_TRY_DEFAULT_INPUT, TARGET_TRY_MAX_CHARS
from runs.web.schemas import BodyIn, DbId, QueryText

TARGET_CONFIG_HELP = (
    "the target kind's parameters (GET /api/v1/targets/kinds gives each kind's "
    "JSON Schema); secrets only by name (api_key_secret, api_key_env)"
)


class TargetIn(BodyIn):
    project: DbId
    name: str
    kind: str
    config: dict[str, Any] = Field(
        default_factory=dict,
        description=TARGET_CONFIG_HELP,
        json_schema_extra=kinds_schema("targets"),
    )


class TargetOut(Schema):
    id: int
    project: int = Field(alias="project_id")
    name: str
    kind: str
    config: dict[str, Any]
    created_at: datetime


class TargetFilter(FilterSchema):
    project: Annotated[DbId | None, FilterLookup("project_id")] = None
    kind: Annotated[QueryText | None, FilterLookup("kind")] = None


class TargetPatch(BodyIn):
    name: str | None = Field(None, min_length=1, max_length=200)
    config: dict[str, Any] | None = Field(
        None, description="the whole new configuration, validated as on creation"
    )


class TargetTryIn(BodyIn):
    input: str = Field(
        TARGET_TRY_DEFAULT_INPUT, min_length=1, max_length=TARGET_TRY_MAX_CHARS
    )

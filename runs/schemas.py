"""Request and response shapes of the JSON API.

Annotations are resolved at runtime by pydantic and django-ninja, so every
name used in one is imported at module level, never under TYPE_CHECKING.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, FilterLookup, FilterSchema, Schema

from runs.importers import FieldMap
from runs.models import (
    Dataset,
    Item,
    Result,
    ResultStatus,
    Run,
    RunStatus,
    Score,
    Target,
)
from runs.reports import run_score_means

# -- shared -------------------------------------------------------------------


class ErrorOut(Schema):
    detail: str
    field: str | None = None
    line: int | None = Field(None, description="1-based line of an uploaded file")
    record: int | None = Field(
        None, description="1-based position in a list of items or a JSON/YAML array"
    )


# -- datasets -----------------------------------------------------------------


EXPECTED_FIELD_HELP = (
    "the field with the expected answer; empty or null when the items have none. "
    "A named field that no item has is refused, naming the fields found."
)


class DatasetIn(Schema):
    project: int
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
    project: int
    name: str = Field("", description="default: the file's name without extension")
    format: str | None = Field(
        None,
        description="jsonl, csv, json, yaml or humaneval; default: from the file name",
    )
    id_field: str = "id"
    input_field: str = "input"
    expected_field: str | None = Field("expected", description=EXPECTED_FIELD_HELP)
    description: str = ""
    reuse_identical: bool = False


class DatasetPreviewForm(Schema):
    format: str | None = Field(
        None,
        description="jsonl, csv, json, yaml or humaneval; default: from the file name",
    )


class FieldGuessOut(Schema):
    id_field: str
    input_field: str
    expected_field: str | None = Field(
        description="null when no field looks like an expected answer"
    )

    @staticmethod
    def resolve_id_field(obj: FieldMap) -> str:
        return obj.id

    @staticmethod
    def resolve_input_field(obj: FieldMap) -> str:
        return obj.input

    @staticmethod
    def resolve_expected_field(obj: FieldMap) -> str | None:
        return obj.expected


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
    project: int
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
    def resolve_project(obj: Dataset) -> int:
        return obj.project_id

    @staticmethod
    def resolve_fields(obj: Dataset) -> dict[str, int]:
        return obj.field_counts or {}


class DatasetFilter(FilterSchema):
    project: Annotated[int | None, FilterLookup("project_id")] = None
    name: Annotated[str | None, FilterLookup("name")] = None


class ItemOut(Schema):
    index: int
    external_id: str
    input: Any
    expected: Any = None
    metadata: dict[str, Any]

    @staticmethod
    def resolve_metadata(obj: Item) -> dict[str, Any]:
        return obj.metadata or {}


# -- targets ------------------------------------------------------------------


class TargetIn(Schema):
    project: int
    name: str
    kind: str
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="secrets only as names of environment variables (api_key_env)",
    )


class TargetOut(Schema):
    id: int
    project: int
    name: str
    kind: str
    config: dict[str, Any]
    created_at: datetime

    @staticmethod
    def resolve_project(obj: Target) -> int:
        return obj.project_id


class TargetFilter(FilterSchema):
    project: Annotated[int | None, FilterLookup("project_id")] = None
    kind: Annotated[str | None, FilterLookup("kind")] = None


# -- runs ---------------------------------------------------------------------


class ScorerSpecIn(Schema):
    kind: str
    name: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class RunIn(Schema):
    dataset: int
    target: int | None = Field(None, description="a stored target's id, or ...")
    target_kind: str | None = Field(None, description="... an ad-hoc target's kind")
    target_config: dict[str, Any] | None = None
    scorers: list[str | ScorerSpecIn]
    options: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "concurrency, timeout_seconds, max_attempts, epochs, "
            "scorer_timeout_seconds, backoff_base_seconds, backoff_max_seconds"
        ),
    )
    name: str = ""

    def scorer_specs(self) -> list[str | dict[str, Any]]:
        return [
            spec if isinstance(spec, str) else spec.model_dump(exclude_none=True)
            for spec in self.scorers
        ]


class RunCounts(Schema):
    total: int
    succeeded: int
    failed: int
    timed_out: int
    cancelled: int
    skipped: int
    pending: int
    processed: int


class RunOut(Schema):
    id: int
    project: int
    name: str
    status: RunStatus
    cancel_requested: bool
    error: str
    dataset: int
    dataset_hash: str
    target: int | None
    target_kind: str
    target_name: str
    target_config: dict[str, Any]
    scorers: list[dict[str, Any]]
    options: dict[str, Any]
    parent: int | None
    counts: RunCounts
    prompt_tokens: int
    completion_tokens: int
    cost: float
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    wall_seconds: float | None

    @staticmethod
    def resolve_project(obj: Run) -> int:
        return obj.project_id

    @staticmethod
    def resolve_dataset(obj: Run) -> int:
        return obj.dataset_id

    @staticmethod
    def resolve_target(obj: Run) -> int | None:
        return obj.target_id

    @staticmethod
    def resolve_parent(obj: Run) -> int | None:
        return obj.parent_id

    @staticmethod
    def resolve_counts(obj: Run) -> Run:
        # The counts are the run's own fields and properties.
        return obj


class RunDetailOut(RunOut):
    score_means: dict[str, float | None] = Field(
        description="mean score value per scorer; errored scores are left out"
    )

    @staticmethod
    def resolve_score_means(obj: Run) -> dict[str, float | None]:
        return run_score_means(obj)


class RunFilter(FilterSchema):
    project: Annotated[int | None, FilterLookup("project_id")] = None
    dataset: Annotated[int | None, FilterLookup("dataset_id")] = None
    status: Annotated[RunStatus | None, FilterLookup("status")] = None


class ScoreOut(Schema):
    scorer: str
    value: float | None
    passed: bool | None
    reason: str
    error: str


class ResultOut(Schema):
    id: int
    index: int
    external_id: str
    epoch: int
    status: ResultStatus
    output: Any = None
    error_kind: str
    error_type: str
    error_message: str
    error_signature: str
    attempts: list[dict[str, Any]]
    attempt_count: int
    latency_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    started_at: datetime
    finished_at: datetime
    scores: list[ScoreOut]

    @staticmethod
    def resolve_index(obj: Result) -> int:
        return obj.item_index

    @staticmethod
    def resolve_external_id(obj: Result) -> str:
        return obj.item.external_id

    @staticmethod
    def resolve_scores(obj: Result) -> list[Score]:
        # .all() keeps the selector's prefetch.
        return list(obj.scores.all())

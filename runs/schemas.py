"""Request and response shapes of the JSON API.

Annotations are resolved at runtime by pydantic and django-ninja, so every
name used in one is imported at module level, never under TYPE_CHECKING.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from django.db.models import QuerySet
from ninja import Field, FilterLookup, FilterSchema, Schema
from ninja.schema import DjangoGetter
from pydantic import model_validator

from runs.analysis.summary import (
    PASS_RATE_DEFINITION,
    RunSummary,
    ScorerSummary,
    run_score_means,
)
from runs.executor.options import RunOptions
from runs.importers import FieldMap
from runs.models import (
    ApiKey,
    Dataset,
    ErrorKind,
    Item,
    Membership,
    ProjectSecret,
    Result,
    ResultStatus,
    Run,
    RunStatus,
    Score,
    ScoringPass,
    Target,
)
from runs.plugins import json_schema
from runs.services import TARGET_TRY_DEFAULT_INPUT, TARGET_TRY_MAX_CHARS

# -- shared -------------------------------------------------------------------

# Ids and page numbers beyond what the database stores are refused (422), not
# sent to it (an overflow there was a 500).
MAX_DB_INT = 2**63 - 1
DbId = Annotated[int, Field(ge=1, le=MAX_DB_INT)]


class ValidationErrorOut(Schema):
    detail: list[dict[str, Any]] = Field(
        description="one entry per invalid value: its location, message and type"
    )


class ErrorOut(Schema):
    detail: str
    field: str | None = None
    line: int | None = Field(None, description="1-based line of an uploaded file")
    record: int | None = Field(
        None, description="1-based position in a list of items or a JSON/YAML array"
    )


class BodyIn(Schema):
    """A request body: a JSON object, never anything else.

    ninja's schemas also read attributes of arbitrary objects (for responses),
    so a body of ``[null, null]`` would otherwise pass as an object whose fields
    all take their defaults.
    """

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        raw = data._obj if isinstance(data, DjangoGetter) else data
        if not isinstance(raw, dict):
            raise ValueError("must be a JSON object")
        _storable(raw, "body")
        return data


def _storable(value: Any, where: str) -> None:
    """Refuse text no database can store: NUL characters and lone surrogates.

    PostgreSQL refuses both (in text and in JSON), so they would otherwise be a
    server error at the first write; pages' form fields refuse them already.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where} contains a NUL character (\\u0000)")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where} contains an unpaired surrogate") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key, where)
            _storable(item, f"{where}.{key}")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _storable(item, f"{where}[{position}]")


def _run_options_schema(schema: dict[str, Any]) -> None:
    # Derived from RunOptions when the schema is built: every option, typed.
    declared = json_schema(RunOptions)
    schema["properties"] = declared["properties"]
    schema["additionalProperties"] = False


def _kinds_schema(registry: str) -> Any:
    def extra(schema: dict[str, Any]) -> None:
        from runs.scorers import REGISTRY as SCORERS
        from runs.targets import REGISTRY as TARGETS

        plugins = TARGETS if registry == "targets" else SCORERS
        schema["x-parameters-by-kind"] = {
            kind: json_schema(cls.Params) for kind, cls in sorted(plugins.items())
        }

    return extra


TARGET_CONFIG_HELP = (
    "the target kind's parameters (GET /api/v1/targets/kinds gives each kind's "
    "JSON Schema); secrets only by name (api_key_secret, api_key_env)"
)


# -- plug-ins -------------------------------------------------------------------


class PluginKindOut(Schema):
    kind: str
    label: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema of the parameters")
    example: dict[str, Any]
    secrets: list[str] = Field(
        description="parameters that name a secret (never hold one)"
    )


class ScorerKindOut(PluginKindOut):
    needs_expected: bool = Field(
        description="whether the scorer compares with the item's expected answer"
    )


# -- datasets -----------------------------------------------------------------


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
    project: Annotated[DbId | None, FilterLookup("project_id")] = None
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


class TargetIn(BodyIn):
    project: DbId
    name: str
    kind: str
    config: dict[str, Any] = Field(
        default_factory=dict,
        description=TARGET_CONFIG_HELP,
        json_schema_extra=_kinds_schema("targets"),
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
    project: Annotated[DbId | None, FilterLookup("project_id")] = None
    kind: Annotated[str | None, FilterLookup("kind")] = None


# -- runs ---------------------------------------------------------------------


class ScorerSpecIn(BodyIn):
    kind: str
    name: str | None = Field(
        None,
        description="unique in the run; defaults to the kind, so a kind used "
        "twice needs a name (judge-strict, judge-lenient)",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="the scorer kind's parameters (GET /api/v1/scorers gives "
        "each kind's JSON Schema)",
        json_schema_extra=_kinds_schema("scorers"),
    )
    # Validated by the service, so that a bad condition is a 400 naming
    # scorers[i].when.<field>.
    when: dict[str, Any] | None = Field(
        None,
        description='{"scorer": "<name>", "passed": true|false}: run only when '
        "that scorer, declared earlier in the run, passed (or failed); otherwise "
        "the score is stored as skipped, with the reason",
        json_schema_extra={
            "properties": {
                "scorer": {"type": "string"},
                "passed": {"type": "boolean"},
            },
            "required": ["scorer", "passed"],
        },
    )


class RunIn(BodyIn):
    dataset: DbId
    target: DbId | None = Field(None, description="a stored target's id, or ...")
    target_kind: str | None = Field(None, description="... an ad-hoc target's kind")
    target_config: dict[str, Any] | None = Field(
        None, description=TARGET_CONFIG_HELP, json_schema_extra=_kinds_schema("targets")
    )
    scorers: list[str | ScorerSpecIn]
    # Validated by the service, not here, so that a bad option is a 400 naming
    # options.<name>, as it always was; documented with every declared option.
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="run options; each is optional and has a default",
        json_schema_extra=_run_options_schema,
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
    # Only the run's own columns: the API's run list is cached under them
    # (runs/hot_reads.py run_records); a field read from another table would
    # need that key to read it too.
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
    unpriced: int = Field(
        description="results whose tokens have no price: their cost is not in cost"
    )
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
    project: Annotated[DbId | None, FilterLookup("project_id")] = None
    dataset: Annotated[DbId | None, FilterLookup("dataset_id")] = None
    status: Annotated[RunStatus | None, FilterLookup("status")] = None


class ScoreOut(Schema):
    scorer: str
    value: float | None
    passed: bool | None
    reason: str
    error: str
    skipped: bool = Field(
        False,
        description="the scorer's condition (when) did not hold: neither passed "
        "nor failed; the reason says why",
    )
    prompt_tokens: int | None = Field(None, description="a judge's prompt tokens")
    completion_tokens: int | None = Field(
        None, description="a judge's completion tokens"
    )
    cost: float | None = Field(None, description="a judge's cost, when known")
    model: str = Field("", description="the judge model that answered")


class ResultOut(Schema):
    id: int
    index: int
    external_id: str
    input: Any = Field(None, description="the item's input, as stored in the dataset")
    expected: Any = Field(
        None, description="the item's expected answer; null when it has none"
    )
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
    model: str = Field("", description="the model that answered, for its price")
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
    def resolve_input(obj: Result) -> Any:
        return obj.item.input

    @staticmethod
    def resolve_expected(obj: Result) -> Any:
        return obj.item.expected

    @staticmethod
    def resolve_scores(obj: Result) -> list[Score]:
        # .all() keeps the selector's prefetch.
        return list(obj.scores.all())


# -- projects and members -------------------------------------------------------


class ProjectIn(BodyIn):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""


class ProjectOut(Schema):
    id: int
    name: str
    description: str
    created_at: datetime
    role: Membership.Role = Field(description="your role in the project")
    member_count: int


class MemberIn(BodyIn):
    user: str = Field(
        min_length=1,
        max_length=254,
        description="the username or email address of an existing user",
    )
    role: Membership.Role = Membership.Role.EDITOR


class MemberPatch(BodyIn):
    role: Membership.Role


class MemberOut(Schema):
    user: int = Field(description="the user's id")
    username: str
    role: Membership.Role
    created_at: datetime

    @staticmethod
    def resolve_user(obj: Membership) -> int:
        return obj.user_id

    @staticmethod
    def resolve_username(obj: Membership) -> str:
        return obj.user.get_username()


# -- API keys -----------------------------------------------------------------


class ApiKeyIn(BodyIn):
    name: str = Field(min_length=1, max_length=100, description="what the key is for")


class ApiKeyOut(Schema):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    active: bool

    @staticmethod
    def resolve_active(obj: ApiKey) -> bool:
        return obj.is_active


class ApiKeyCreatedOut(ApiKeyOut):
    key: str = Field(description="the key itself, returned only this once")


# -- one target: edit and try ------------------------------------------------------


class TargetPatch(BodyIn):
    name: str | None = Field(None, min_length=1, max_length=200)
    config: dict[str, Any] | None = Field(
        None, description="the whole new configuration, validated as on creation"
    )


class TargetTryIn(BodyIn):
    input: str = Field(
        TARGET_TRY_DEFAULT_INPUT, min_length=1, max_length=TARGET_TRY_MAX_CHARS
    )


class TargetTryOut(Schema):
    ok: bool = Field(description="the target answered")
    output: str = Field(description="the answer, as text")
    error: str
    error_type: str
    latency_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    http_status: int | None


# -- project secrets ----------------------------------------------------------


class SecretIn(BodyIn):
    value: str | None = Field(
        None,
        description=(
            "the secret's value (at most 8192 characters, no control characters); "
            "stored encrypted and never returned. Required for a new secret; "
            "left out, an existing secret keeps its value"
        ),
    )
    hosts: list[str] | None = Field(
        None,
        max_length=100,
        description=(
            "where the secret may be sent: host (https on port 443), *.suffix "
            "(names below suffix), or scheme://host:port (http must be written "
            'out), e.g. ["api.openai.com", "http://127.0.0.1:8000"]. Required '
            "for a new secret; left out, an existing secret keeps its hosts"
        ),
    )


class SecretOut(Schema):
    """A project secret's name and history; its value is never returned."""

    name: str
    hosts: list[str] = Field(
        description="where the secret may be sent; none: nowhere until bound"
    )
    created_at: datetime
    updated_at: datetime
    updated_by: str | None = Field(
        None, description="who last set the value or the hosts"
    )

    @staticmethod
    def resolve_updated_by(obj: ProjectSecret) -> str | None:
        return obj.updated_by.get_username() if obj.updated_by else None


# -- comparison ---------------------------------------------------------------


class ScorerComparisonOut(Schema):
    """One (candidate, scorer) against the baseline, over the paired items."""

    scorer: str
    candidate: int
    paired: int = Field(
        description="items with results in both runs, this scorer's not skipped"
    )
    unpaired: int = Field(description="items with results in only one of the two")
    skipped: int = Field(
        description=(
            "items with results in both runs whose score of this scorer was "
            "skipped by its condition (every epoch) in either: not paired"
        )
    )
    measure: str = Field(
        description="what delta is of: pass_rate, or mean (numeric scorers)"
    )
    baseline_pass_rate: float | None
    candidate_pass_rate: float | None
    baseline_mean: float | None
    candidate_mean: float | None
    delta: float | None = Field(description="candidate minus baseline")
    delta_ci: list[float] | None = Field(description="95% interval of delta")
    interval: str | None = Field(
        description="newcombe_paired (pass/fail) or bootstrap_percentile"
    )
    both_passed: int
    regressions: int = Field(description="passed in the baseline, not the candidate")
    improvements: int = Field(description="passed in the candidate, not the baseline")
    both_failed: int
    test: str | None = Field(description="mcnemar_exact or paired_bootstrap")
    p_value: float | None
    p_value_adjusted: float | None = Field(
        description="Holm-adjusted across every (candidate, scorer) of the answer"
    )
    verdict: str = Field(
        description="better, worse or no_significant_difference (alpha 0.05)"
    )
    mde: float | None = Field(
        description=(
            "minimum detectable effect at 80% power, when there is no "
            "significant difference"
        )
    )


class ComparisonOut(Schema):
    baseline: int
    candidates: list[int]
    paired_by: str = Field(description="item, or external_id across versions")
    unpaired: int = Field(
        description="items with results in some of the runs but not in all"
    )
    scorers: list[ScorerComparisonOut]

    @staticmethod
    def resolve_baseline(obj: Any) -> int:
        return obj.baseline.pk

    @staticmethod
    def resolve_candidates(obj: Any) -> list[int]:
        return [run.pk for run in obj.candidates]


# -- failure clusters -----------------------------------------------------------


class ClusterItemOut(Schema):
    result_id: int
    index: int
    epoch: int
    external_id: str


class ClusterOut(Schema):
    key: str = Field(
        description=(
            "names the cluster in ?cluster= filters: the error signature, or "
            "score:<scorer>:<signature> for failing scores"
        )
    )
    signature: str
    kind: str = Field(
        description="the error kind; for failing scores 'failed' or 'error'"
    )
    error_type: str
    pattern: str = Field(description="the message with what varies masked")
    example: str = Field(description="one message of the cluster, unmasked")
    count: int
    share: float | None = Field(description="count / the run's stored results")
    baseline_count: int | None = Field(
        description="the count in the baseline run; null without a baseline"
    )
    change: str | None = Field(
        description="new, grown, shrunk, same or vanished; null without a baseline"
    )
    items: list[ClusterItemOut] = Field(description="the first items, in order")


class ScoreClusterOut(ClusterOut):
    scorer: str


class RunClustersOut(Schema):
    run: int
    baseline: int | None
    results: int = Field(description="the run's stored results (shares' base)")
    error_clusters: int = Field(description="error clusters in all")
    failed_score_clusters: int = Field(description="failing-score clusters in all")
    errors: list[ClusterOut]
    failed_scores: list[ScoreClusterOut]

    @staticmethod
    def resolve_run(obj: Any) -> int:
        return obj.run.pk

    @staticmethod
    def resolve_baseline(obj: Any) -> int | None:
        return obj.baseline.pk if obj.baseline is not None else None


# -- run summary --------------------------------------------------------------


class ScorerSummaryOut(Schema):
    scorer: str
    results: int = Field(description="every stored result of the run, all epochs")
    skipped: int = Field(
        0,
        description="results whose score was skipped by its condition (when): "
        "neither passed nor failed, left out of the pass rate's denominator",
    )
    prompt_tokens: int | None = Field(
        None,
        description="a judge's prompt tokens over the run's scores (not in the "
        "run's token totals, which are the target's); null for other scorers",
    )
    completion_tokens: int | None = Field(
        None, description="a judge's completion tokens, as prompt_tokens"
    )
    scored: int = Field(description="results whose score has a value")
    errored: int = Field(description="results whose scorer raised or timed out")
    not_scored: int = Field(
        description="results whose target call failed or timed out: no score"
    )
    passed: int
    mean: float | None = Field(description="mean of the scores that have a value")
    pass_rate: float | None = Field(
        description="passed / (results - skipped); failed target calls and "
        "errored scores count as not passed. Null without results"
    )
    pass_rate_ci: tuple[float, float] | None = Field(
        description="Wilson 95% interval of the pass rate"
    )
    pass_at_k: dict[str, float | None] = Field(
        description="k -> unbiased pass@k (Chen et al. 2021), mean over items, for "
        "k = 1, 2, 4, ... up to the epochs; empty with one epoch. Items with "
        "fewer than k results are left out; null when none has k"
    )
    pass_hat_k: dict[str, float | None] = Field(
        description="k -> pass^k (all k attempts pass), mean over items; as pass_at_k"
    )

    @staticmethod
    def resolve_pass_at_k(obj: ScorerSummary) -> dict[str, float | None]:
        return {str(k): value for k, value in obj.pass_at_k.items()}

    @staticmethod
    def resolve_pass_hat_k(obj: ScorerSummary) -> dict[str, float | None]:
        return {str(k): value for k, value in obj.pass_hat_k.items()}


class LatencyOut(Schema):
    p50: float | None
    p90: float | None
    p99: float | None
    min: float | None
    max: float | None
    count: int = Field(description="succeeded results with a latency")


class TokensOut(Schema):
    prompt: int
    completion: int


class RunSummaryOut(Schema):
    run: int
    status: RunStatus
    epochs: int
    counts: RunCounts
    scorers: list[ScorerSummaryOut] = Field(description="in the run's scorer order")
    latency_ms: LatencyOut = Field(
        description="percentiles over succeeded results (linear interpolation)"
    )
    tokens: TokensOut
    cost: float | None = Field(description="null when no result has a cost")
    unpriced_models: list[str] = Field(description="models with tokens but no price")
    error_kinds: dict[str, int] = Field(description="results per error kind")
    retried: int = Field(description="results that needed more than one attempt")
    definition: str = Field(description="how the pass rate is counted")

    @staticmethod
    def resolve_latency_ms(obj: RunSummary) -> dict[str, Any]:
        return {**obj.latency_ms, "count": obj.latency_count}

    @staticmethod
    def resolve_definition(obj: RunSummary) -> str:
        return PASS_RATE_DEFINITION


# -- a run's results filtered; retry inside a run --------------------------------


class ResultFilterIn(Schema):
    """Filters of a run's results (GET /runs/{id}/results); they combine."""

    status: ResultStatus | Literal["pending", "skipped"] | None = Field(
        None,
        description="a result status (succeeded, failed, timed_out, cancelled), "
        "or pending (items with no result yet, while the run is going) or "
        "skipped (the same, once the run has ended)",
    )
    error_kind: ErrorKind | None = None
    scorer: str | None = Field(None, description="one of the run's scorer names")
    verdict: Literal["passed", "failed", "errored", "skipped"] | None = Field(
        None,
        description="with scorer: passed, failed (scored, not passed), errored "
        "(the scorer raised or timed out) or skipped (its condition did not hold)",
    )
    external_id: str | None = Field(None, description="the item's external id")
    cluster: str | None = Field(None, description="a failure cluster's key")


@dataclass(frozen=True, slots=True)
class PendingRow:
    """An item without a result, listed as a row of the results."""

    item: Item
    status: str
    id: None = None
    epoch: None = None
    output: None = None
    error_kind: str = ""
    error_type: str = ""
    error_message: str = ""
    error_signature: str = ""
    attempts: tuple[()] = ()
    attempt_count: int = 0
    latency_ms: None = None
    prompt_tokens: None = None
    completion_tokens: None = None
    cost: None = None
    started_at: None = None
    finished_at: None = None

    @property
    def item_index(self) -> int:
        return self.item.index


class PendingRows:
    """A page-sliceable list of PendingRow over a queryset of items."""

    def __init__(self, items: QuerySet[Item], status: str) -> None:
        self.items, self.status = items, status

    def __len__(self) -> int:
        return self.items.count()

    def __getitem__(self, where: slice) -> list[PendingRow]:
        return [PendingRow(item, self.status) for item in self.items[where]]


class ResultRowOut(ResultOut):
    """A result, or (status pending / skipped) an item that has none: then
    ``id``, ``epoch`` and the times are null."""

    id: int | None
    epoch: int | None
    status: str
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_scores(obj: Result | PendingRow) -> list[Score]:
        return [] if isinstance(obj, PendingRow) else list(obj.scores.all())


class RetryIn(BodyIn):
    statuses: list[str] | None = Field(
        None,
        max_length=8,
        description="result statuses to retry (succeeded, failed, timed_out, "
        "cancelled) and/or skipped (items with no result); items with no result "
        "always run with a retry. Default: failed and timed_out, or with a "
        "cluster every result of it",
    )
    cluster: str | None = Field(
        None, max_length=64, description="only the results of this failure cluster"
    )
    dry_run: bool = Field(False, description="say what would run; change nothing")


class RetryOut(Schema):
    items: int = Field(description="distinct items to run")
    results: int = Field(description="(item, epoch) executions: rewrites + missing")
    rewrites: int = Field(description="stored results rewritten in place")
    missing: int = Field(description="(item, epoch) without a result, run too")
    calls: int = Field(description="at most: results times max_attempts")
    statuses: list[str]
    cluster: str | None
    launched: bool
    run: RunDetailOut


# -- re-scoring a run --------------------------------------------------------------


class RescoreIn(BodyIn):
    scorers: list[str | ScorerSpecIn] = Field(
        description="scorers as on run creation; one whose name (its kind by "
        "default) the run already has replaces that scorer and its scores, "
        "another kind under the same name included; others are added",
        max_length=50,
    )
    dry_run: bool = Field(False, description="say what would be scored; change nothing")

    def scorer_specs(self) -> list[str | dict[str, Any]]:
        return [
            spec if isinstance(spec, str) else spec.model_dump(exclude_none=True)
            for spec in self.scorers
        ]


class ScoringPassOut(Schema):
    """One scoring pass of a run: the run's own execution (``initial``, with
    ``id`` null until the run is first re-scored) or a re-score."""

    id: int | None
    initial: bool
    status: Literal["pending", "running", "completed", "failed", "interrupted"] = Field(
        description="interrupted: its executor stopped before it ended; "
        "re-score with the same scorers to run it again"
    )
    scorers: list[dict[str, Any]] = Field(description="name, kind and params of each")
    total: int = Field(description="results with an output, to score")
    scored: int = Field(description="results whose scores this pass stored")
    errored: int = Field(description="scores of this pass that are scorer errors")
    error: str
    user: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_status(obj: ScoringPass) -> str:
        return "interrupted" if obj.stale else obj.status

    @staticmethod
    def resolve_user(obj: ScoringPass) -> str | None:
        return obj.user.get_username() if obj.user else None


class RescoreOut(Schema):
    results: int = Field(description="results with an output, scored by the pass")
    added: list[str] = Field(description="scorer names new to the run")
    replaced: list[str] = Field(description="scorer names whose scores are replaced")
    kind_changes: dict[str, list[str]] = Field(
        description="replaced names whose kind changes: [old kind, new kind]"
    )
    launched: bool
    scoring_pass: ScoringPassOut | None = Field(
        description="the pass started; null for a dry run"
    )
    run: RunDetailOut


# -- tokens and cost -------------------------------------------------------------


class ResumeIn(BodyIn):
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="options to change as the run resumes: only cost_budget "
        "(US dollars; null for none)",
    )


class ResumeOut(Schema):
    run: RunDetailOut
    launched: bool

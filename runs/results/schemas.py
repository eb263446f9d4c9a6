"""The API schemas of runs, their results and their summaries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from ninja import Field, FilterLookup, FilterSchema, Schema

from runs.analysis.summary import (
    PASS_RATE_DEFINITION,
    RunSummary,
    ScorerSummary,
    run_pass_rates,
    run_score_means,
)
from runs.catalogue.schemas import kinds_schema
from runs.executor.options import RunOptions
from runs.models import (
    ErrorKind,
    Item,
    Result,
    ResultStatus,
    RetryPass,
    Run,
    RunStatus,
    Score,
)
from runs.plugins import json_schema
from runs.targets.schemas import TARGET_CONFIG_HELP
from runs.web.schemas import BodyIn, DbId, QueryText

if TYPE_CHECKING:
    from runs.results.rows import Rows


def run_options_schema(schema: dict[str, Any]) -> None:
    # Derived from RunOptions when the schema is built: every option, typed.
    declared = json_schema(RunOptions)
    schema["properties"] = declared["properties"]
    schema["additionalProperties"] = False


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
        json_schema_extra=kinds_schema("scorers"),
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


def given_specs(scorers: list[str | ScorerSpecIn]) -> list[str | dict[str, Any]]:
    """Scorers as a body gives them, as the services take them: a kind by its
    name, or a spec with only the fields given."""
    return [
        spec if isinstance(spec, str) else spec.model_dump(exclude_none=True)
        for spec in scorers
    ]


class RunIn(BodyIn):
    dataset: DbId
    target: DbId | None = Field(None, description="a stored target's id, or ...")
    target_kind: str | None = Field(None, description="... an ad-hoc target's kind")
    target_config: dict[str, Any] | None = Field(
        None, description=TARGET_CONFIG_HELP, json_schema_extra=kinds_schema("targets")
    )
    scorers: list[str | ScorerSpecIn]
    # Validated by the service, not here, so that a bad option is a 400 naming
    # options.<name>, as it always was; documented with every declared option.
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="run options; each is optional and has a default",
        json_schema_extra=run_options_schema,
    )
    name: str = ""

    def scorer_specs(self) -> list[str | dict[str, Any]]:
        return given_specs(self.scorers)


class RunCounts(Schema):
    total: int
    succeeded: int
    failed: int
    timed_out: int
    cancelled: int
    skipped: int
    pending: int
    processed: int


class RunSpecOut(Schema):
    """What a run runs, as a run records it and an evaluation saves it: the
    dataset, the target (stored, or a kind and its configuration), the
    scorers and the options."""

    id: int
    project: int = Field(alias="project_id")
    name: str
    dataset: int = Field(alias="dataset_id")
    target: int | None = Field(alias="target_id")
    target_kind: str
    target_config: dict[str, Any]
    scorers: list[dict[str, Any]]
    options: dict[str, Any]


class RunOut(RunSpecOut):
    # Only the run's own columns: the API's run list is cached under them
    # (runs/records/reads.py run_records); a field read from another table would
    # need that key to read it too.
    status: RunStatus
    cancel_requested: bool
    error: str
    dataset_hash: str
    target_name: str
    parent: int | None = Field(alias="parent_id")
    item_limit: int | None = Field(
        description="the run's items are only its dataset's first item_limit "
        "(a cost sample's); null: all of them"
    )
    counts: RunCounts
    prompt_tokens: int
    completion_tokens: int
    cost: float | None = Field(
        description="the priced results' cost; null when no result has one (no "
        "price for the model, or nothing used), as in the run's summary"
    )
    unpriced: int = Field(
        description="results whose tokens have no price: their cost is not in cost"
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    wall_seconds: float | None = Field(
        description="finished_at - started_at: the first execution's; each "
        "retry pass has its own (retry_passes of the run)"
    )
    retry_replaced: int = Field(
        description="stored results that retries replaced in place with a new "
        "outcome: N results re-drawn by retry (counted since retry passes are "
        "recorded)"
    )
    retry_replaced_answers: int = Field(
        description="of retry_replaced, the results that had an answer"
    )

    @staticmethod
    def resolve_counts(obj: Run) -> Run:
        # The counts are the run's own fields and properties.
        return obj

    @staticmethod
    def resolve_cost(obj: Run) -> float | None:
        # Run.cost adds up the priced results from 0: nothing added (every
        # result unpriced, or no tokens used) is no cost known, not $0.
        used = obj.prompt_tokens or obj.completion_tokens
        if not obj.cost and (obj.unpriced or not used):
            return None
        return obj.cost


class RetryPassOut(Schema):
    """One retry inside the run: its own timing, what it ran and changed."""

    id: int
    status: str
    statuses: list[str] = Field(description="the result statuses it chose")
    cluster: str = Field(description="the cluster it chose, if any")
    results: int = Field(description="stored results it ran again")
    missing: int = Field(description="(item, epoch) without a result it ran")
    replaced: int = Field(description="results it replaced with a new outcome")
    redrawn: int = Field(description="of replaced, those that had an answer")
    kept: int = Field(description="results that kept their previous outcome")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    seconds: float | None = Field(description="how long it took (wall clock)")


class RunDetailOut(RunOut):
    pass_rate: dict[str, float | None] = Field(
        description="the pass rate per scorer, each scorer's headline figure: "
        "passed / (results - skipped - stopped), as the summary's pass_rate "
        "(failed target calls and errored scores count as not passed; results "
        "stopped in flight are no sample); null without results"
    )
    score_means: dict[str, float | None] = Field(
        description="mean score value per scorer, over the scores that have a "
        "value (errored scores and failed target calls are left out): not the "
        "pass rate"
    )
    retry_passes: list[RetryPassOut] = Field(
        description="the run's retry passes, oldest first"
    )
    estimated_cost: float | None = Field(
        None,
        description="what the run was expected to cost (US dollars) when it was "
        "created, from the last runs of its target over its dataset; null "
        "without such a run",
    )
    estimate_basis: dict[str, Any] | None = Field(
        None, description="what the estimate was made from (POST /runs/estimate)"
    )

    @staticmethod
    def resolve_pass_rate(obj: Run) -> dict[str, float | None]:
        return run_pass_rates(obj)

    @staticmethod
    def resolve_score_means(obj: Run) -> dict[str, float | None]:
        return run_score_means(obj)

    @staticmethod
    def resolve_retry_passes(obj: Run) -> list[RetryPass]:
        return list(RetryPass.objects.filter(run=obj))


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


class ScorerSummaryOut(Schema):
    scorer: str
    results: int = Field(description="every stored result of the run, all epochs")
    skipped: int = Field(
        0,
        description="results whose score was skipped by its condition (when): "
        "neither passed nor failed, left out of the pass rate's denominator",
    )
    stopped: int = Field(
        0,
        description="results stopped in flight: their call was cut short because "
        "the run stopped (a cancel, fail fast, the deadline, the cost budget). "
        "No sample: neither passed nor failed, left out of the pass rate's "
        "denominator and of pass@k. A call that ran out of its own timeout is "
        "not stopped: it counts as not passed",
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
        description="results whose target call failed, timed out or was "
        "stopped in flight: no score (the stopped ones are in stopped too)"
    )
    passed: int
    mean: float | None = Field(description="mean of the scores that have a value")
    pass_rate: float | None = Field(
        description="passed / (results - skipped - stopped); failed or "
        "timed-out target calls and errored scores count as not passed, results "
        "stopped in flight are no sample. Null without results"
    )
    pass_rate_ci: tuple[float, float] | None = Field(
        description="95% interval of the pass rate, computed as "
        "pass_rate_ci_method says"
    )
    pass_rate_ci_method: Literal["wilson", "wilson_clustered_items"] = Field(
        "wilson",
        description="wilson: Wilson's score interval (one epoch). "
        "wilson_clustered_items (several epochs, whose results for one item are "
        "not independent trials): Wilson's interval at the effective sample size "
        "p(1-p)/V, V the cluster-robust variance over items of the ratio "
        "passed / (results - skipped) with the factor G/(G-1) for G items, and "
        "Student's quantile on G-1 degrees of freedom; null with fewer than two "
        "items",
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


class PercentilesOut(Schema):
    p50: float | None
    p90: float | None
    p99: float | None


class LatencyOut(PercentilesOut):
    min: float | None
    max: float | None
    count: int = Field(description="succeeded results with a latency")


class TimeToResultOut(PercentilesOut):
    count: int = Field(description="succeeded results with a time to result")


class TokensOut(Schema):
    prompt: int
    completion: int


class ToolFiguresOut(Schema):
    tool: str
    calls: int
    errors: int = Field(description="calls whose step has an error")
    error_rate: float


class StepKindOut(Schema):
    kind: str = Field(description="model or tool")
    steps: int
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: float | None = Field(description="the steps' latencies added up")


class StepPercentilesOut(Schema):
    p50: float | None
    p90: float | None


class StepSummaryOut(Schema):
    results: int = Field(description="results counted: with steps or not (0)")
    with_steps: int
    steps: int
    tool_calls: int
    steps_per_result: StepPercentilesOut
    tool_calls_per_result: StepPercentilesOut
    tools: list[ToolFiguresOut] = Field(description="most calls first")
    kinds: list[StepKindOut]


class RunSummaryOut(Schema):
    run: int
    status: RunStatus
    epochs: int
    counts: RunCounts
    scorers: list[ScorerSummaryOut] = Field(description="in the run's scorer order")
    latency_ms: LatencyOut = Field(
        description="the last attempt's latency: percentiles over succeeded "
        "results (linear interpolation)"
    )
    time_to_result_ms: TimeToResultOut = Field(
        description="from the first attempt's start to the last one's end, "
        "failed attempts and back-off included; as latency_ms"
    )
    tokens: TokensOut
    cost: float | None = Field(description="null when no result has a cost")
    unpriced_models: list[str] = Field(description="models with tokens but no price")
    error_kinds: dict[str, int] = Field(description="results per error kind")
    retried: int = Field(description="results that needed more than one attempt")
    failed_attempts: int = Field(
        description="attempts that failed, retried or not (a failed result's "
        "last attempt included)"
    )
    attempt_error_kinds: dict[str, int] = Field(
        description="failed attempts per error kind"
    )
    definition: str = Field(description="how the pass rate is counted")
    steps: StepSummaryOut | None = Field(
        None, description="trajectories' figures; null when no result has steps"
    )

    @staticmethod
    def resolve_latency_ms(obj: RunSummary) -> dict[str, Any]:
        return {**obj.latency_ms, "count": obj.latency_count}

    @staticmethod
    def resolve_time_to_result_ms(obj: RunSummary) -> dict[str, Any]:
        return {**obj.time_to_result_ms, "count": obj.time_to_result_count}

    @staticmethod
    def resolve_definition(obj: RunSummary) -> str:
        return PASS_RATE_DEFINITION


class ResultFilterIn(Schema):
    """Filters of a run's results (GET /runs/{id}/results); they combine."""

    status: ResultStatus | Literal["pending", "skipped"] | None = Field(
        None,
        description="a result status (succeeded, failed, timed_out, cancelled), "
        "or pending (items with no result yet, while the run is going) or "
        "skipped (the same, once the run has ended)",
    )
    error_kind: ErrorKind | None = None
    scorer: QueryText | None = Field(None, description="one of the run's scorer names")
    verdict: Literal["passed", "failed", "errored", "skipped"] | None = Field(
        None,
        description="with scorer: passed, failed (scored, not passed), errored "
        "(the scorer raised or timed out) or skipped (its condition did not hold)",
    )
    external_id: QueryText | None = Field(None, description="the item's external id")
    cluster: QueryText | None = Field(None, description="a failure cluster's key")


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
    """A page-sliceable list of PendingRow over items (``rows.Rows``)."""

    def __init__(self, items: Rows, status: str) -> None:
        self.items, self.status = items, status

    def __len__(self) -> int:
        return self.items.count()

    def __getitem__(self, where: slice) -> list[PendingRow]:
        return [PendingRow(item, self.status) for item in self.items[where]]


class ResultRowOut(ResultOut):
    """A result, or (status pending / skipped) an item that has none: then
    ``id``, ``epoch`` and the times are null."""

    # Wider than ResultOut's on purpose: a row may be an item without a result.
    id: int | None  # type: ignore[assignment]  # see above
    epoch: int | None  # type: ignore[assignment]  # see above
    status: str  # type: ignore[assignment]  # see above
    started_at: datetime | None  # type: ignore[assignment]  # see above
    finished_at: datetime | None  # type: ignore[assignment]  # see above

    @staticmethod
    def resolve_scores(obj: Result | PendingRow) -> list[Score]:
        return [] if isinstance(obj, PendingRow) else list(obj.scores.all())

"""The trajectory endpoints' schemas: a page of a result's steps, and a diff."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema
from pydantic import BaseModel, ConfigDict

from runs.results.trajectory import TrajectoryTotals


class StepCallOut(BaseModel):
    """A step as a trajectory's page and a diff's cell both show it: what it
    called and how the call went. A plain pydantic model, as ``DiffStepOut``
    must be."""

    model_config = ConfigDict(from_attributes=True)

    index: int
    kind: str = Field(description="model or tool")
    name: str = Field(description="the tool, or the model that answered")
    call_hash: str = Field(description="stable hash of tool and arguments")
    error: str
    error_type: str
    latency_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None


class StepOut(Schema, StepCallOut):
    call_id: str
    arguments: Any = Field(
        description="a tool call's arguments; a model call's messages sent"
    )
    output: Any = Field(description="a tool call's result; a model call's reply")
    arguments_bytes: int = Field(description="full size of the arguments as JSON")
    output_bytes: int = Field(description="full size of the output as JSON")
    cut: bool = Field(
        description="a payload was cut: it holds the start of its JSON text"
    )
    model: str


class TrajectoryOut(Schema):
    result: int
    run: int
    item_index: int
    epoch: int
    totals: TrajectoryTotals
    page: int
    pages: int
    per_page: int
    steps: list[StepOut]


class DiffStepOut(StepCallOut):
    # A pydantic model, not a ninja Schema: a page of a 10-way diff holds
    # 2,000 of them, read from their attributes by pydantic itself (a
    # Schema reads each field through Django's template variable lookup).
    index: int = Field(description="its index in its run's trajectory")
    arguments: Any = Field(description="a tool call's arguments (as stored)")


class DiffColumnOut(Schema):
    run: int
    result: int | None = Field(description="None: the run has no result for the item")
    steps: int = Field(description="how many steps its trajectory has")


class DiffRowOut(Schema):
    row: int
    same: bool = Field(description="every run has a step here, and they are equal")
    cells: list[DiffStepOut | None] = Field(
        description="per run, its step in this row (None: it has none here)"
    )


class TrajectoryDiffOut(Schema):
    item: int
    item_index: int
    external_id: str
    epoch: int
    columns: list[DiffColumnOut]
    first_divergence: int | None = Field(
        description="the first row where the runs differ; None: they never do"
    )
    row_count: int
    page: int
    pages: int
    per_page: int
    rows: list[DiffRowOut]


class StepClusterOut(Schema):
    tool: str
    error_type: str
    pattern: str = Field(description="the error, with what varies masked")
    results: int
    examples: list[tuple[int, int, int]] = Field(
        description="the first results in it: (item index, epoch, result id)"
    )


class FailingStepsOut(Schema):
    failing: int = Field(description="failing results: call or a score failed")
    without_failed_step: int = Field(description="of them, with no failed tool call")
    clusters: list[StepClusterOut] = Field(description="biggest first")


class PairedFigureOut(Schema):
    measure: str = Field(description="steps or cost, per item")
    pairs: int
    baseline_mean: float | None
    candidate_mean: float | None
    mean_difference: float | None = Field(description="candidate - baseline")
    p_value: float | None = Field(
        description="Wilcoxon signed-rank, two-sided; null: no difference to test"
    )


class StepComparisonOut(Schema):
    baseline: int
    candidate: int
    paired_by: str
    figures: list[PairedFigureOut]

"""The review API's schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema

from runs.models import ReviewLabel, ReviewQueue
from runs.review.selectors import Progress, queue_progress, shown_value
from runs.web.schemas import BodyIn, DbId


class QueueIn(BodyIn):
    run: DbId = Field(description="the ended run whose results are reviewed")
    name: str = Field(max_length=200, description="its scorer is human:<name>")
    source: str = Field("run", description="run, filter, cluster, sample or comparison")
    source_params: dict[str, Any] = Field(
        default_factory=dict,
        description="filter: the results page's filters (status, scorer, verdict, "
        "error_kind, external_id, cluster); cluster: {cluster}; sample: {size, "
        "scorer, seed}",
    )
    other_run: DbId | None = Field(None, description="a comparison's other run")
    rubric: dict[str, Any] = Field(
        default_factory=dict,
        description="kind (pass_fail, scale, labels, preference), labels, "
        "multiple, criteria, note, show_expected, pass_at",
    )
    raters: int = Field(1, description="reviewers per item")
    reviewers: list[str] | None = Field(None, description="usernames of members")
    open_pool: bool | None = Field(
        None, description="any member may review (default: when none is named)"
    )
    blind: bool = True
    description: str = Field("", max_length=5_000)


class QueuePatchIn(BodyIn):
    raters: int | None = None
    reviewers: list[str] | None = None
    open_pool: bool | None = None
    blind: bool | None = None
    description: str | None = Field(None, max_length=5_000)


class ProgressOut(Schema):
    items: int
    complete: int
    labels: int
    mine: int


class QueueOut(Schema):
    id: int
    project: int = Field(alias="project_id")
    name: str
    scorer: str = Field(alias="scorer_name")
    description: str
    source: str
    source_params: dict[str, Any]
    run: int = Field(alias="run_id")
    other_run: int | None = Field(alias="other_run_id")
    rubric: dict[str, Any]
    raters: int
    open_pool: bool
    blind: bool
    created_at: datetime


class QueueDetailOut(QueueOut):
    reviewers: list[str]
    progress: ProgressOut = Field(description="yours in ``mine``")

    @staticmethod
    def resolve_reviewers(obj: ReviewQueue) -> list[str]:
        return [user.get_username() for user in obj.reviewers.all()]

    @staticmethod
    def resolve_progress(obj: ReviewQueue, context: dict[str, Any]) -> Progress:
        return queue_progress(queue=obj, user=context["request"].auth)


class OutputOut(Schema):
    side: str
    text: str


class ReviewItemOut(Schema):
    """An item handed to the caller, blind: no run, target, model, judge or
    other reviewer."""

    label: int
    item: int
    position: int
    input: str
    expected: str | None
    outputs: list[OutputOut]
    value: Any = Field(description="as the caller gave it (a preference by side)")
    criteria: dict[str, Any]
    note: str
    submitted: bool


class NextOut(Schema):
    done: bool
    item: ReviewItemOut | None


class LabelIn(BodyIn):
    value: Any = Field(
        None,
        description='"pass"/"fail", 1 to 5, a label (or a list of them), or '
        '"left"/"right"/"tie" for a comparison',
    )
    criteria: dict[str, Any] | None = None
    note: str | None = Field(None, max_length=5_000)


class LabelCreateIn(LabelIn):
    item: DbId = Field(description="the review item handed to the caller")


class GivenLabelOut(Schema):
    """A stored label, a reviewer's or an adjudicator's: its id and what was
    given (the value, criteria by name, a note)."""

    id: int
    value: Any
    criteria: dict[str, Any]
    note: str


class LabelOut(GivenLabelOut):
    item: int = Field(alias="review_item_id")
    submitted: bool
    updated_at: datetime | None

    @staticmethod
    def resolve_value(obj: ReviewLabel) -> Any:
        return shown_value(obj.queue, obj)


class MatrixOut(Schema):
    kind: str
    categories: list[Any]
    items: list[int]
    raters: list[str]
    values: list[list[Any]]


class StatisticOut(Schema):
    statistic: str
    value: float | None
    items: int
    undefined: str = Field(description="why the statistic is not defined, if not")
    interval: tuple[float, float] | None
    confidence: float


class DisputedOut(Schema):
    review_item: int
    position: int
    labels: dict[str, Any] = Field(description="each rater's label, by username")
    settled: Any = Field(description="the adjudicated label, if any")
    settled_by: str


class CriterionAgreementOut(Schema):
    criterion: str | None = Field(description="null: the queue's overall label")
    raters: list[str]
    items: int
    levels: list[str]
    estimates: list[StatisticOut]
    disputed: list[DisputedOut] = Field(description="the first disputed items")
    disputed_total: int = Field(description="how many items are disputed in all")
    undefined: str


class AdjudicationIn(BodyIn):
    value: Any = Field(description="the label that settles the item")
    criteria: dict[str, Any] | None = None
    note: str = ""


class AdjudicationOut(GivenLabelOut):
    review_item: int = Field(alias="review_item_id")
    user: str | None = Field(None, alias="user.username")
    changed_at: datetime


class DatasetSaveIn(BodyIn):
    name: str = Field("", description='default: "<queue> labels"')
    description: str = ""

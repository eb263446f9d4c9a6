"""The evaluation API's schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, FilterLookup, FilterSchema, Schema

from runs.catalogue.schemas import kinds_schema
from runs.models import Evaluation, Schedule
from runs.results.schemas import (
    RunSpecOut,
    ScorerSpecIn,
    given_specs,
    run_options_schema,
)
from runs.targets.schemas import TARGET_CONFIG_HELP
from runs.web.schemas import BodyIn, DbId


class EvaluationFields(BodyIn):
    description: str | None = None
    dataset_policy: str | None = Field(
        None, description="fixed: the dataset version given; latest: the newest "
        "version of its name when a run starts"
    )  # fmt: skip
    target_kind: str | None = Field(None, description="an ad-hoc target's kind")
    target_config: dict[str, Any] | None = Field(
        None, description=TARGET_CONFIG_HELP, json_schema_extra=kinds_schema("targets")
    )
    options: dict[str, Any] | None = Field(
        None, description="run options (as POST /api/v1/runs takes them)",
        json_schema_extra=run_options_schema,
    )  # fmt: skip
    baseline_policy: str | None = Field(
        None, description="previous: the evaluation's previous completed run; "
        "fixed: baseline_run; none"
    )  # fmt: skip
    baseline_run: DbId | None = None
    pass_rate_floors: dict[str, float] | None = Field(
        None, description="scorer name -> the least pass rate (0 to 1) its runs "
        "should reach"
    )  # fmt: skip
    channels: list[DbId] | None = Field(
        None, description="ids of alert channels of the project "
        "(/api/v1/alert-channels): told when a run of the evaluation is worse "
        "than its baseline, below a floor, or fails"
    )  # fmt: skip

    def scorer_specs(self) -> list[str | dict[str, Any]] | None:
        scorers: list[str | ScorerSpecIn] | None = getattr(self, "scorers", None)
        return None if scorers is None else given_specs(scorers)


class EvaluationIn(EvaluationFields):
    project: DbId
    name: str
    dataset: DbId
    target: DbId | None = Field(None, description="a stored target's id, or ...")
    scorers: list[str | ScorerSpecIn]


class EvaluationPatch(EvaluationFields):
    name: str | None = None
    dataset: DbId | None = None
    target: DbId | None = None
    scorers: list[str | ScorerSpecIn] | None = None


class ScheduleIn(BodyIn):
    cron: str = Field(description="five fields: minute hour day month weekday")
    timezone: str = Field("UTC", description="an IANA time zone: Europe/Paris")


class ScheduleOut(Schema):
    id: int
    cron: str
    timezone: str
    enabled: bool
    last_tick_at: datetime


class EvaluationOut(RunSpecOut):
    description: str
    dataset_policy: str
    baseline_policy: str
    baseline_run: int | None = Field(alias="baseline_run_id")
    pass_rate_floors: dict[str, float]
    channels: list[int]
    schedules: list[ScheduleOut]
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_channels(obj: Evaluation) -> list[int]:
        return sorted(channel.pk for channel in obj.channels.all())

    @staticmethod
    def resolve_schedules(obj: Evaluation) -> list[Schedule]:
        return list(obj.schedules.all())


class EvaluationFilter(FilterSchema):
    project: Annotated[DbId | None, FilterLookup("project_id")] = None


class ChangeOut(Schema):
    action: str
    changes: dict[str, Any]
    user: str | None
    at: datetime

    @staticmethod
    def resolve_user(obj: Any) -> str | None:
        return obj.user.username if obj.user is not None else None


class TriggerIn(BodyIn):
    target: DbId | None = Field(
        None, description="another stored target of the project (a candidate)"
    )
    target_kind: str | None = Field(
        None, description="... or another kind, with target_config"
    )
    target_config: dict[str, Any] | None = Field(
        None, description="with target_kind, the candidate's configuration; "
        "alone, keys that replace those of the evaluation's target (a model)",
    )  # fmt: skip
    name: str = ""


class TriggerOut(Schema):
    run: int = Field(description="the run started")
    status: str
    evaluation: int
    baseline: int | None = Field(
        description="the run it will be compared with, if the policy names one "
        "now (`manage.py evalcompare BASELINE RUN` gives the verdict)"
    )
    url: str = Field(description="the run's page")
    api_url: str
    compare_url: str | None

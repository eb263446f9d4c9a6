"""The re-scoring API's schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

from runs.models import ScoringPass
from runs.results.schemas import RunDetailOut, ScorerSpecIn, given_specs
from runs.web.schemas import BodyIn


class RescoreIn(BodyIn):
    scorers: list[str | ScorerSpecIn] = Field(
        description="scorers as on run creation; one whose name (its kind by "
        "default) the run already has replaces that scorer and its scores, "
        "another kind under the same name included; others are added",
        max_length=50,
    )
    dry_run: bool = Field(False, description="say what would be scored; change nothing")

    def scorer_specs(self) -> list[str | dict[str, Any]]:
        return given_specs(self.scorers)


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

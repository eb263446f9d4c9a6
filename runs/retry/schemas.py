"""The retry and resume API's schemas."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema

from runs.results.schemas import RunDetailOut
from runs.web.schemas import BodyIn


class RetryIn(BodyIn):
    statuses: list[str] | None = Field(
        None,
        max_length=8,
        description="result statuses to retry (succeeded, failed, timed_out, "
        "cancelled) and/or skipped (items with no result); items with no result "
        "always run with a retry. Default: failed and timed_out, or with a "
        "cluster every result of it. A retry runs errors only: a choice that "
        "takes in an answer scored passed or failed (not every score an "
        "error) is refused with 400 naming the field",
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


class ResumeIn(BodyIn):
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="options to change as the run resumes: only cost_budget "
        "(US dollars; null for none)",
    )


class ResumeOut(Schema):
    run: RunDetailOut
    launched: bool

"""The API schemas of cost estimates."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema

from runs.results.schemas import RunIn


class EstimateIn(RunIn):
    sample: int | None = Field(
        None,
        ge=1,
        le=20,
        description="send this many items (the first ones) through the target "
        "for real, as a run of its own that is charged like any run; the "
        "answer is 202 with that run's id, and estimates read it once it ends",
    )


class PartOut(Schema):
    prompt_tokens: float = Field(description="per result (item and epoch)")
    completion_tokens: float
    cost: float | None = Field(description="US dollars per result")
    source: str = Field(description="past_runs, or text_length (a judge no run used)")
    unpriced: list[str]


class EstimateOut(Schema):
    cost: float | None = Field(
        description="US dollars for the whole run; null with no basis or a model "
        "without a price"
    )
    basis: str = Field(description="past_runs, or none (sample some items)")
    items: int
    epochs: int
    results: int
    runs: list[int] = Field(description="the past runs the figures come from")
    target: PartOut | None
    judges: dict[str, PartOut]
    budget: float | None = Field(description="the run's cost budget, if any")
    over_budget: bool
    unpriced: list[str]
    note: str
    sample_run: int | None = None

    @staticmethod
    def resolve_sample_run(obj: dict[str, Any]) -> int | None:
        return obj.get("sample_run")

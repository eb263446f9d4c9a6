"""A result's trajectory as its page shows it: its steps page by page, with
the figures of all of them (the trajectory section of the result's page; the
trajectories API and the diff read it too)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Q, QuerySet, Sum
from pydantic import Field

from runs.models import Result, Step
from runs.models.steps import STEP_PAYLOAD_BYTES

STEPS_PER_PAGE = 200
PREVIEW_CHARS = 100


# Also the trajectory API's schema of them (its docstring and descriptions
# are the API's documentation).
@dataclass(frozen=True, slots=True)
class TrajectoryTotals:
    """A trajectory's figures over all its steps, from one aggregate."""

    steps: int
    model_calls: int
    tool_calls: int
    errors: int
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: Annotated[
        float | None, Field(description="the steps' latencies added up")
    ]


def trajectory_totals(result_id: int) -> TrajectoryTotals:
    totals = Step.objects.filter(result_id=result_id).aggregate(
        steps=Count("id"),
        model_calls=Count("id", filter=Q(kind=Step.Kind.MODEL)),
        tool_calls=Count("id", filter=Q(kind=Step.Kind.TOOL)),
        errors=Count("id", filter=~Q(error="") | ~Q(error_type="")),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        cost=Sum("cost"),
        latency_ms=Sum("latency_ms"),
    )
    return TrajectoryTotals(**totals)


class CountedRows:
    """A queryset for a Paginator whose count is known already (no COUNT)."""

    def __init__(self, rows: QuerySet[Any], count: int) -> None:
        self.rows = rows
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: slice) -> list[Any]:
        return list(self.rows[index])


def page_number(text: str | None) -> int:
    """A page number from a query (anything else: the first page)."""
    if text and text.isascii() and text.isdigit() and len(text) <= 9:
        return max(int(text), 1)
    return 1


def shown_text(value: Any) -> str:
    """A payload as the page shows it: a text as it is, JSON indented."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=repr)


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A payload on one line, cut at ``limit`` characters."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text[: limit * 4].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class StepView:
    """A step as the page shows it, its payloads written out once, here."""

    step: Step
    summary: str  # a tool call's arguments on one line
    arguments: str | None
    output: str | None
    arguments_cut: bool
    output_cut: bool

    @classmethod
    def of(cls, step: Step) -> StepView:
        return cls(
            step=step,
            summary=preview(step.arguments) if step.kind == Step.Kind.TOOL else "",
            arguments=None if step.arguments is None else shown_text(step.arguments),
            output=None if step.output is None else shown_text(step.output),
            arguments_cut=step.arguments_bytes > STEP_PAYLOAD_BYTES,
            output_cut=step.output_bytes > STEP_PAYLOAD_BYTES,
        )

    @property
    def failed(self) -> bool:
        return bool(self.step.error or self.step.error_type)

    @property
    def figures(self) -> str:
        """Its latency, tokens and cost, on one line (written here: the
        template's number filters cost more than the rest of a step)."""
        return step_figures(
            self.step.latency_ms,
            self.step.prompt_tokens,
            self.step.completion_tokens,
            self.step.cost,
        )


def step_figures(
    latency_ms: float | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    cost: float | None,
) -> str:
    parts = []
    if latency_ms is not None:
        parts.append(f"{latency_ms:.1f} ms")
    if prompt_tokens is not None or completion_tokens is not None:
        # An en dash, as the pages write a missing figure.
        prompt = "\u2013" if prompt_tokens is None else prompt_tokens
        completion = "\u2013" if completion_tokens is None else completion_tokens
        parts.append(f"{prompt} + {completion} tokens")
    if cost is not None:
        parts.append(f"${cost:.6f}")
    return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class TrajectoryPage:
    result: Result
    totals: TrajectoryTotals
    page: Page[Step]

    @property
    def limit(self) -> int:
        """The bytes of a payload kept: a larger one was cut."""
        return STEP_PAYLOAD_BYTES

    @property
    def steps(self) -> list[StepView]:
        return [StepView.of(step) for step in self.page.object_list]


def trajectory_page(*, result: Result, number: str | int | None) -> TrajectoryPage:
    """One page of a result's steps, in order, with the figures of all of them."""
    totals = trajectory_totals(result.pk)
    rows = Step.objects.filter(result_id=result.pk).order_by("index")
    paginator: Paginator[Step] = Paginator(
        CountedRows(rows, totals.steps),  # type: ignore[arg-type]  # counts and slices
        STEPS_PER_PAGE,
    )
    wanted = number if isinstance(number, int) else page_number(number)
    return TrajectoryPage(result, totals, paginator.get_page(wanted))


def trajectory_section(result: Result, number: str | None) -> TrajectoryPage | None:
    """The trajectory section of a result's page (None: the result has no steps)."""
    if not result.run.has_steps:  # its run never stored a step: nothing to read
        return None
    trajectory = trajectory_page(result=result, number=number)
    return trajectory if trajectory.totals.steps else None

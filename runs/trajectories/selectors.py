"""Reads of trajectories: a result's steps page by page, and one item's
trajectories in several runs aligned (``alignment``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.db.models import Q

from runs.access import visible_project_ids
from runs.compare.selectors import run_ids_parse
from runs.errors import InvalidInput, NotFound
from runs.models import Item, Result, Run, Step
from runs.results.selectors import run_get
from runs.results.trajectory import (
    TrajectoryPage,
    page_number,
    preview,
    step_figures,
    trajectory_page,
)
from runs.trajectories.alignment import Row, align, first_divergence, step_token

# Rows of a diff a page shows (a cell per run each), and an API page holds.
DIFF_ROWS_PER_PAGE = 50
DIFF_API_ROWS_PER_PAGE = 200
# What a diff reads of every step to align them (what it compares), and of
# the steps of the rows it shows (``SHOWN_FIELDS``, as ``DiffStep``).
DIFF_FIELDS = ("result_id", "id", "kind", "name", "call_hash")
SHOWN_FIELDS = (
    "id", "index", "kind", "name", "call_hash", "prompt_tokens",
    "completion_tokens", "cost", "arguments", "error", "error_type", "latency_ms",
)  # fmt: skip


def epoch_number(text: str | None) -> int:
    """An epoch from a query (anything else: the first, 0)."""
    if text and text.isascii() and text.isdigit() and len(text) <= 6:
        return int(text)
    return 0


def visible_result(*, user: User, result_id: int) -> Result:
    """A result in a project the user may see, else NotFound."""
    try:
        return Result.objects.select_related("run", "item").get(
            pk=result_id, run__project_id__in=visible_project_ids(user)
        )
    except Result.DoesNotExist:
        raise NotFound(f"no result {result_id}") from None


def result_trajectory(
    *, user: User, result_id: int, page: str | int | None = None
) -> TrajectoryPage:
    """A page of the steps of a result the user may see."""
    return trajectory_page(
        result=visible_result(user=user, result_id=result_id), number=page
    )


# -- the diff -------------------------------------------------------------------


@dataclass(slots=True)
class DiffStep:
    """What a diff shows of one step (its payloads only for the rows shown)."""

    id: int
    index: int
    kind: str
    name: str
    call_hash: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    arguments: Any  # a tool call's (a model call's messages are left out)
    error: str
    error_type: str
    latency_ms: float | None

    @property
    def failed(self) -> bool:
        return bool(self.error or self.error_type)

    @property
    def figures(self) -> str:
        return step_figures(
            self.latency_ms, self.prompt_tokens, self.completion_tokens, self.cost
        )

    @property
    def summary(self) -> str:
        return preview(self.arguments, 80) if self.kind == Step.Kind.TOOL else ""

    @property
    def title(self) -> str:
        return preview(self.arguments, 2000) if self.kind == Step.Kind.TOOL else ""


@dataclass(slots=True)
class DiffColumn:
    """One run's trajectory of the item: its steps' ids and what they compare by."""

    run: Run
    result: Result | None
    ids: list[int] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TrajectoryDiff:
    item: Item
    epoch: int
    columns: list[DiffColumn]
    rows: list[Row]
    first_divergence: int | None

    @property
    def divergence_page(self) -> int | None:
        if self.first_divergence is None:
            return None
        return self.first_divergence // DIFF_ROWS_PER_PAGE + 1

    def shown(self, rows: Sequence[Row]) -> list[tuple[Row, list[DiffStep | None]]]:
        """Rows with each run's step in them, read for these rows only."""
        ids = [
            [self.columns[n].ids[c] if c is not None else None
             for n, c in enumerate(row.cells)]
            for row in rows
        ]  # fmt: skip
        wanted = [pk for row in ids for pk in row if pk is not None]
        found = {}
        for values in Step.objects.filter(pk__in=wanted).values_list(*SHOWN_FIELDS):
            step = DiffStep(*values)
            if step.kind != Step.Kind.TOOL:
                step.arguments = None
            found[step.id] = step
        return [
            (row, [None if pk is None else found.get(pk) for pk in row_ids])
            for row, row_ids in zip(rows, ids, strict=True)
        ]


class DiffRows:
    """The rows of a diff for a Paginator, each with its steps."""

    def __init__(self, diff: TrajectoryDiff) -> None:
        self.diff = diff

    def __len__(self) -> int:
        return len(self.diff.rows)

    def __getitem__(self, index: slice) -> list[tuple[int, Row, list[DiffStep | None]]]:
        start = index.start or 0
        return [
            (start + n, *pair)
            for n, pair in enumerate(self.diff.shown(self.diff.rows[index]))
        ]


def diff_runs(*, user: User, runs: str | None) -> list[Run]:
    """The runs of ``1,2,3`` (two or more, each the user's to see; a run
    given twice is shown twice)."""
    ids = run_ids_parse(runs, field="runs")
    if len(ids) < 2:
        raise InvalidInput("give two or more runs to compare", field="runs")
    return [run_get(user=user, run_id=run_id) for run_id in ids]


def diff_item(*, runs: Sequence[Run], item_id: int | None) -> Item:
    """The item, of the dataset of one of the runs (else NotFound)."""
    if item_id is None:
        raise InvalidInput("give the id of an item", field="item")
    try:
        return Item.objects.get(pk=item_id, dataset_id__in=[r.dataset_id for r in runs])
    except Item.DoesNotExist:
        raise NotFound(f"no item {item_id} in these runs") from None


def item_results(runs: Sequence[Run], item: Item, epoch: int) -> list[Result | None]:
    """Each run's result for the item (the same item, or the item of the same
    external id in another version of the dataset) in ``epoch``."""
    found: list[Result | None] = []
    for run in runs:
        results = Result.objects.filter(run=run, epoch=epoch)
        same = Q(item_id=item.pk)
        if item.external_id:
            same |= Q(item__external_id=item.external_id)
        found.append(results.filter(same).order_by("-item_id").first())
    return found


def trajectory_diff(
    *,
    user: User,
    item_id: int | None,
    runs: str | None,
    epoch: int = 0,
) -> TrajectoryDiff:
    """One item's trajectories in two or more runs, aligned on the first run's."""
    chosen = diff_runs(user=user, runs=runs)
    item = diff_item(runs=chosen, item_id=item_id)
    results = item_results(chosen, item, epoch)
    columns = [
        DiffColumn(run, result) for run, result in zip(chosen, results, strict=True)
    ]
    by_result = {c.result.pk: c for c in columns if c.result is not None}
    rows = (
        Step.objects.filter(result_id__in=list(by_result))
        .order_by("result_id", "index")
        .values_list(*DIFF_FIELDS)
    )
    for result_id, pk, kind, name, hashed in rows:
        column = by_result[result_id]
        column.ids.append(pk)
        column.tokens.append(step_token(kind, name, hashed))
    aligned = align([column.tokens for column in columns])
    return TrajectoryDiff(item, epoch, columns, aligned, first_divergence(aligned))


def diff_page(
    diff: TrajectoryDiff, number: str | int | None, per_page: int = DIFF_ROWS_PER_PAGE
) -> Page[Any]:
    """A page of the diff's rows: (row number, row, each run's step or None)."""
    paginator: Paginator[Any] = Paginator(
        DiffRows(diff),  # type: ignore[arg-type]  # counts and slices
        per_page,
    )
    wanted = number if isinstance(number, int) else page_number(number)
    return paginator.get_page(wanted)

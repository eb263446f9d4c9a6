"""Reads of trajectories: a result's steps page by page, and one item's
trajectories in several runs aligned (``alignment``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    CharField,
    F,
    JSONField,
    Q,
    StringAgg,
    Value,
    When,
)
from django.db.models.functions import Cast

from runs.access import visible_project_ids
from runs.compare.selectors import run_ids_parse
from runs.errors import InvalidInput, NotFound
from runs.models import Item, Result, Run, Step
from runs.results.selectors import run_list
from runs.results.trajectory import (
    TrajectoryPage,
    page_number,
    preview,
    step_figures,
    trajectory_page,
)
from runs.trajectories.alignment import (
    Alignment,
    Row,
    align,
    first_divergence,
)

# Rows of a diff a page shows (a cell per run each), and an API page holds.
DIFF_ROWS_PER_PAGE = 50
DIFF_API_ROWS_PER_PAGE = 200
# What a diff reads of the steps of the rows it shows (as ``DiffStep``; the
# arguments of tool calls only: a model call's messages are not shown). Of
# every step it reads only its index and what it compares by (``column_read``).
SHOWN_FIELDS = (
    "id", "index", "kind", "name", "call_hash", "prompt_tokens",
    "completion_tokens", "cost", "error", "error_type", "latency_ms",
)  # fmt: skip
TOOL_ARGUMENTS = Case(
    When(kind=Step.Kind.TOOL, then=F("arguments")), output_field=JSONField()
)


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
    error: str
    error_type: str
    latency_ms: float | None
    arguments: Any  # a tool call's (a model call's messages are left out)

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
    """One run's trajectory of the item: its steps' indexes, in order, and
    what each compares by (its ``call_hash``: "" for a model call)."""

    run: Run
    result: Result | None
    indexes: list[int] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.indexes)

    @property
    def result_id(self) -> int | None:
        return None if self.result is None else self.result.pk


@dataclass(slots=True)
class TrajectoryDiff:
    item: Item
    epoch: int
    columns: list[DiffColumn]
    rows: Alignment
    first_divergence: int | None

    @property
    def divergence_page(self) -> int | None:
        if self.first_divergence is None:
            return None
        return self.first_divergence // DIFF_ROWS_PER_PAGE + 1

    def shown(self, rows: Sequence[Row]) -> list[tuple[Row, list[DiffStep | None]]]:
        """Rows with each run's step in them, read for these rows only."""
        # Rows in order hold each run's steps in order: those of a page are
        # a range of its steps.
        where = Q(pk__in=[])
        for n, column in enumerate(self.columns):
            cells = [c for c in (row.cells[n] for row in rows) if c is not None]
            if cells:
                first, last = column.indexes[cells[0]], column.indexes[cells[-1]]
                where |= Q(result_id=column.result_id, index__range=(first, last))
        fields = Step.objects.filter(where).values_list(
            "result_id", *SHOWN_FIELDS, TOOL_ARGUMENTS
        )
        found = {(result, step[1]): DiffStep(*step) for result, *step in fields}
        return [
            (row, [None if cell is None
                   else found.get((column.result_id, column.indexes[cell]))
                   for column, cell in zip(self.columns, row.cells, strict=True)])
            for row in rows
        ]  # fmt: skip


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
    given twice is shown twice), read in one query."""
    ids = run_ids_parse(runs, field="runs")
    if len(ids) < 2:
        raise InvalidInput("give two or more runs to compare", field="runs")
    found = run_list(user=user).select_related("created_by").in_bulk(ids)
    for run_id in ids:
        if run_id not in found:
            raise NotFound(f"no run {run_id}")
    return [found[run_id] for run_id in ids]


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
    same = Q(item_id=item.pk)
    if item.external_id:
        same |= Q(item__external_id=item.external_id)
    found: dict[int, Result] = {}
    results = Result.objects.filter(same, run__in=runs, epoch=epoch)
    for result in results.order_by("run_id", "-item_id"):
        found.setdefault(result.run_id, result)
    return [found.get(run.pk) for run in runs]


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
    columns_read(columns)
    aligned = align([column.tokens for column in columns])
    return TrajectoryDiff(item, epoch, columns, aligned, first_divergence(aligned))


def columns_read(columns: Sequence[DiffColumn]) -> None:
    """The indexes and tokens of each column's steps, in order: for each
    result two texts (a 5,000-step trajectory is 5,000 rows, two strings),
    one aggregate a result (each an index range scan, no sort), all in one
    query."""
    result_ids = list(dict.fromkeys(c.result_id for c in columns if c.result_id))
    if not result_ids:
        return
    parts = [
        Step.objects.filter(result_id=result_id)
        .order_by()
        .values("result_id")
        .annotate(
            indexes=StringAgg(Cast("index", CharField()), Value(",")),
            tokens=StringAgg("call_hash", Value(",")),
        )
        .values_list("result_id", "indexes", "tokens")
        for result_id in result_ids
    ]
    rows = parts[0].union(*parts[1:], all=True).order_by() if parts[1:] else parts[0]
    found = {
        result_id: in_index_order(indexes, tokens)
        for result_id, indexes, tokens in rows
    }
    for column in columns:
        if column.result_id in found:
            column.indexes, column.tokens = found[column.result_id]


def in_index_order(indexes: str, tokens: str) -> tuple[list[int], list[str]]:
    """Two lists aggregated from the same rows (so in one order, but not
    necessarily the steps': ``StringAgg``'s ``order_by`` needs SQLite 3.44),
    sorted by step index."""
    numbers = np.array(indexes.split(","), dtype=np.int64)
    words = tokens.split(",")
    if len(numbers) > 1 and (np.diff(numbers) < 0).any():
        order = np.argsort(numbers, kind="stable")
        numbers, words = numbers[order], [words[n] for n in order.tolist()]
    return numbers.tolist(), words


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

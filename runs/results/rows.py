"""The rows a run's results table lists under its filters, counted and sliced
as a page asks (Django's Paginator, the API's pagination).

A finished run is filtered in its result table (``analysis/result_table.py``):
the count is exact and found in memory, and any page, the last as the
first, reads only its own rows, by id. A run still going is filtered in SQL:
counted there, and a page past the middle is read from the end, so that the
last page does not walk the whole run.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from django.db.models import QuerySet

from runs.analysis import result_table as columns
from runs.analysis.cluster_keys import is_content_key
from runs.analysis.content_clusters import content_members
from runs.analysis.result_table import ResultTable, run_result_table
from runs.models import Item, Result, Run
from runs.results.selectors import (
    ResultFilters,
    result_filter,
    run_items_left,
)

VERDICT_MARKS = {
    None: columns.SCORED,
    "passed": columns.PASSED,
    "failed": columns.FAILED,
    "errored": columns.ERRORED,
    "skipped": columns.SKIPPED,
}


class Rows(Protocol):
    """What a page lists: counted, and sliced one page at a time."""

    def count(self) -> int: ...

    def __len__(self) -> int: ...

    def __getitem__(self, where: slice, /) -> list[Any]: ...


def _bounds(where: slice, count: int) -> tuple[int, int]:
    start, stop, step = where.indices(count)
    if step != 1:
        raise ValueError("a page is a slice of consecutive rows")
    return start, max(start, stop)


class QueryRows:
    """A queryset's rows, counted once; a slice past the middle is read in
    the reverse order, from the end."""

    def __init__(self, rows: QuerySet[Any]) -> None:
        self.rows = rows
        self._count: int | None = None

    def count(self) -> int:
        if self._count is None:
            self._count = self.rows.count()
        return self._count

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, where: slice) -> list[Any]:
        count = self.count()
        start, stop = _bounds(where, count)
        if start == stop:
            return []
        if start <= count - stop:
            return list(self.rows[start:stop])
        return list(self.rows.reverse()[count - stop : count - start])[::-1]


class TableRows:
    """Results of a run's result table at ``positions`` (rows, in dataset
    order), or all of them (None)."""

    def __init__(
        self, run: Run, table: ResultTable, positions: np.ndarray | None
    ) -> None:
        self.run, self.table, self.positions = run, table, positions

    def count(self) -> int:
        return len(self.table if self.positions is None else self.positions)

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, where: slice) -> list[Result]:
        if self.positions is None:
            rows = np.arange(*_bounds(where, self.count()))
        else:
            rows = self.positions[where]
        ids = self.table.ids[rows].tolist()
        # By id alone, in the table's order: with the run or an order in the
        # query, its plan may walk the run's index to find them.
        found = (
            Result.objects.filter(pk__in=ids)
            .select_related("item")
            .prefetch_related("scores")
            .order_by()
        )
        by_id = {result.pk: result for result in found} if ids else {}
        return [by_id[pk] for pk in ids if pk in by_id]


class TableItems:
    """Items of a run's dataset at ``indexes`` (item indexes, ascending)."""

    def __init__(self, run: Run, indexes: np.ndarray) -> None:
        self.run, self.indexes = run, indexes

    def count(self) -> int:
        return len(self.indexes)

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, where: slice) -> list[Item]:
        wanted = self.indexes[where].tolist()
        if not wanted:
            return []
        items = Item.objects.filter(dataset_id=self.run.dataset_id, index__in=wanted)
        return list(items.order_by("index"))


def table_positions(
    run: Run, table: ResultTable, filters: ResultFilters
) -> np.ndarray | None:
    """The rows of ``table`` (positions, in dataset order) that pass
    ``filters``; None for every row."""
    if not filters.active:
        return None
    mask = np.ones(len(table), dtype=bool)
    if filters.status:
        mask &= table.text_is("status", filters.status)
    if filters.error_kind:
        mask &= table.text_is("kind", filters.error_kind)
    if filters.scorer:
        mask &= table.marked(filters.scorer, VERDICT_MARKS[filters.verdict])
    if filters.external_id:
        mask &= np.isin(table.items, _item_ids(run, filters.external_id))
    if filters.cluster:
        mask &= _cluster_mask(run, table, filters.cluster)
    return np.flatnonzero(mask)


def _item_ids(run: Run, external_id: str) -> list[int]:
    items = Item.objects.filter(dataset_id=run.dataset_id, external_id=external_id)
    return list(items.values_list("pk", flat=True))


def _cluster_mask(run: Run, table: ResultTable, key: str) -> np.ndarray:
    if is_content_key(key):
        return np.isin(table.ids, content_members(run=run, key=key))
    return table.in_cluster(key)


def _dense_items(run: Run) -> int | None:
    """How many items the run's dataset holds when their indexes are
    0 .. n - 1 (as every import numbers them), else None."""
    count = run.dataset.item_count
    indexes = Item.objects.filter(dataset_id=run.dataset_id).values_list(
        "index", flat=True
    )
    first, last = indexes.order_by("index").first(), indexes.order_by("-index").first()
    if count == 0:
        return 0 if first is None else None
    return count if (first, last) == (0, count - 1) else None


def _items_lacking(run: Run, table: ResultTable) -> np.ndarray | None:
    """Indexes of the items with fewer results than the run's epochs, or None
    when the dataset's indexes are not 0 .. n - 1."""
    items = _dense_items(run)
    if items is None:
        return None
    epochs = run.epochs
    per_item = np.bincount(table.indexes, minlength=items)[:items]
    return np.flatnonzero(per_item < epochs)


def _items_left(run: Run, filters: ResultFilters, table: ResultTable | None) -> Rows:
    items = run_items_left(run=run, filters=filters)
    # One item by its external id is found in SQL at once.
    if table is None or items.query.is_empty() or filters.external_id:
        return QueryRows(items)
    lacking = _items_lacking(run, table)
    return QueryRows(items) if lacking is None else TableItems(run, lacking)


def result_rows(*, run: Run, filters: ResultFilters) -> Rows:
    """The rows of the run's results table under ``filters``: results, or
    (status pending or skipped) the items without one."""
    table = run_result_table(run=run)
    if filters.lists_items:
        return _items_left(run, filters, table)
    # One item's results, by its external id, are found in SQL at once.
    if table is None or filters.external_id:
        return QueryRows(result_filter(run=run, filters=filters))
    return TableRows(run, table, table_positions(run, table, filters))

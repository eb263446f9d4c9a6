"""A result's page: the result, the request its target sent, why the model
stopped, each judge's prompt, and its neighbours in the results table it was
opened from (under that table's filters)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.db.models import Q

from runs.analysis.result_table import run_result_table
from runs.errors import InvalidInput
from runs.models import Result
from runs.results.rows import table_positions
from runs.results.selectors import (
    ResultFilters,
    finish_reason,
    result_filter,
    result_get,
    result_prompts,
    result_request,
)

# The finish reason of an answer cut at max_tokens (OpenAI's).
TRUNCATED = "length"


@dataclass(frozen=True, slots=True)
class ResultView:
    """A result with what its page shows beyond its row: the request its
    target sent, why the model stopped, each judge's prompt, and its
    neighbours among the results of the page it was opened from."""

    result: Result
    filters: ResultFilters
    request: dict[str, Any] | None
    finish_reason: str | None
    previous_id: int | None
    next_id: int | None
    prompts: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        return self.finish_reason == TRUNCATED


def _table_neighbours(
    result: Result, filters: ResultFilters
) -> tuple[int | None, int | None] | None:
    """``result_neighbours`` found in the run's result table; None without
    one, or when the result is not in it."""
    table = run_result_table(run=result.run)
    if table is None:
        return None
    found = np.flatnonzero(table.ids == result.pk)
    if not len(found):
        return None
    at = int(found[0])
    rows = table_positions(result.run, table, filters)
    if rows is None:
        before, after = at, at + 1
        rows = np.arange(len(table))
    else:
        before = int(np.searchsorted(rows, at, side="left"))
        after = int(np.searchsorted(rows, at, side="right"))
    previous = int(table.ids[rows[before - 1]]) if before > 0 else None
    following = int(table.ids[rows[after]]) if after < len(rows) else None
    return previous, following


def result_neighbours(
    *, result: Result, filters: ResultFilters
) -> tuple[int | None, int | None]:
    """The ids of the results before and after ``result`` in the run's results
    table under ``filters`` (dataset order), each None at an end."""
    found = _table_neighbours(result, filters)
    if found is not None:
        return found
    rows = result_filter(run=result.run, filters=filters).prefetch_related(None)
    index, epoch = result.item_index, result.epoch
    before = Q(item_index__lt=index) | Q(item_index=index, epoch__lt=epoch)
    after = Q(item_index__gt=index) | Q(item_index=index, epoch__gt=epoch)
    ids = rows.select_related(None).values_list("pk", flat=True)
    previous = ids.filter(before).order_by("-item_index", "-epoch").first()
    following = ids.filter(after).order_by("item_index", "epoch").first()
    return previous, following


def result_view(
    *, user: User, run_id: int, result_id: int, params: Mapping[str, Any]
) -> ResultView:
    """A result's page: the result, its request, finish reason, judges'
    prompts and neighbours under the results filters in ``params`` (the
    results table's; filters that do not read are left out)."""
    result = result_get(user=user, run_id=run_id, result_id=result_id)
    try:
        filters = ResultFilters.parse(params, run=result.run)
    except InvalidInput:
        filters = ResultFilters()
    if filters.lists_items:
        filters = ResultFilters()
    previous, following = result_neighbours(result=result, filters=filters)
    return ResultView(
        result=result,
        filters=filters,
        request=result_request(run=result.run, item=result.item),
        finish_reason=finish_reason(result),
        previous_id=previous,
        next_id=following,
        prompts=result_prompts(result=result),
    )

"""The state of a run's page, read in one compiled statement: the key its
rendering is cached under (the run's row, its scoring passes, the reader's
role; a going run's by the second), or None when the page must be built."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F, QuerySet, TextField
from django.db.models.functions import Cast

from runs.models import FINAL_RUN_STATUSES, Run, ScoringPass
from runs.records import cache_keys, compiled
from runs.records.compiled import Args
from runs.records.reads import value_columns

_ACTIVE_PASS_STATUSES = (ScoringPass.Status.PENDING, ScoringPass.Status.RUNNING)
# The names of a scoring pass's columns in the run page's read.
PASS_PREFIX = "pass_"
# Columns of a run that its executor moves with each batch it stores or each
# heartbeat: left out of a going run's page key, which holds the second.
BATCH_COLUMNS = frozenset(
    {
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "unpriced",
        "heartbeat_at",
        "in_flight",
        "throttle_limit",
        "call_latency",
    }
)


def _run_page(args: Args) -> QuerySet[Run, dict[str, Any]]:
    # The run's row once for each of its scoring passes, with the pass's
    # columns (PASS_PREFIX), or once with those NULL: one statement on every
    # cached page of a run, where the run and its passes were two.
    username = get_user_model().USERNAME_FIELD
    names, texts = value_columns(Run)
    pass_names, pass_texts = value_columns(ScoringPass)
    passes: dict[str, Any] = {
        PASS_PREFIX + name: F(f"passes__{name}") for name in pass_names
    }
    passes[f"{PASS_PREFIX}username"] = F(f"passes__user__{username}")
    for name in pass_texts:
        field = name.removesuffix("_json")
        passes[PASS_PREFIX + name] = Cast(f"passes__{field}", TextField())
    return (
        Run.objects.filter(
            pk=args.integer("run_id"),
            project__memberships__user_id=args.integer("user_id"),
        )
        .order_by("passes__created_at", "passes__id")
        .values(
            *names,
            **texts,
            project_name=F("project__name"),
            dataset_name=F("dataset__name"),
            dataset_version=F("dataset__version"),
            dataset_item_count=F("dataset__item_count"),
            creator=F(f"created_by__{username}"),
            # The membership the filter joined: the user's role.
            role=F("project__memberships__role"),
            **passes,
        )
    )


def run_page_state(*, user_id: int, run_id: int) -> tuple[Any, ...] | None:
    """Everything a finished run's page shows, as column names and values,
    for its cache key; None when the page must be built afresh (the user is no
    member of the run's project, the run is still going, or a re-score is
    under way).

    What the page reads beyond these values is keyed by the run's own row:
    its figures and results table are cached under ``Run.results_version``,
    whose parts are columns of that row.
    """
    return _page_state(user_id=user_id, run_id=run_id, going=False)


def run_page_key(*, user_id: int, run_id: int) -> tuple[Any, ...] | None:
    """``run_page_state``, and for a run still going its row without what
    moves with each batch (its counts, tokens, cost, heartbeat), its passes
    and the current second (``cache_keys.going_second``).

    A run still going stores a batch up to four times a second: keyed by its
    counts, its page would be rendered again for each. Keyed by the second,
    readers share one rendering a second, never more than a second behind
    what the run stored; a change of its status, name or revision, or of the
    reader's role, still makes another key at once. The page also shows
    what moves with the clock (whether its executor is alive, its ETA).
    """
    return _page_state(user_id=user_id, run_id=run_id, going=True)


@dataclass(frozen=True, slots=True)
class _PageColumns:
    """Where a run page read's columns are: made once per statement, as every
    view of a cached run page reads its state (70 columns)."""

    status: int
    pass_id: int
    pass_status: int
    # The pass's columns (PASS_PREFIX) by their names without it.
    pass_names: tuple[str, ...]
    passes: operator.itemgetter[Any]
    # The run's own columns, and of them those a going run's key holds.
    run_names: tuple[str, ...]
    run: operator.itemgetter[Any]
    going_names: tuple[str, ...]
    going: operator.itemgetter[Any]


@functools.lru_cache(maxsize=4)
def _page_columns(names: tuple[str, ...]) -> _PageColumns:
    own = [n for n, name in enumerate(names) if not name.startswith(PASS_PREFIX)]
    joined = [n for n, name in enumerate(names) if name.startswith(PASS_PREFIX)]
    going = [n for n in own if names[n] not in BATCH_COLUMNS]
    return _PageColumns(
        status=names.index("status"),
        pass_id=names.index("pass_id"),
        pass_status=names.index("pass_status"),
        pass_names=tuple(names[n].removeprefix(PASS_PREFIX) for n in joined),
        passes=operator.itemgetter(*joined),
        run_names=tuple(names[n] for n in own),
        run=operator.itemgetter(*own),
        going_names=tuple(names[n] for n in going),
        going=operator.itemgetter(*going),
    )


def _page_state(*, user_id: int, run_id: int, going: bool) -> tuple[Any, ...] | None:
    # As the database hands them: values to key a cache, not to show.
    names, found = compiled.fetch(
        compiled.statement("run-page", _run_page),
        {"user_id": user_id, "run_id": run_id},
        convert=False,
    )
    if not found:
        return None
    columns = _page_columns(names)
    final = found[0][columns.status] in FINAL_RUN_STATUSES
    if not (final or going):
        return None
    if any(row[columns.pass_status] in _ACTIVE_PASS_STATUSES for row in found):
        return None
    passes = (
        columns.pass_names,
        tuple(columns.passes(row) for row in found if row[columns.pass_id]),
    )
    if final:
        return (columns.run_names, columns.run(found[0])), passes
    # A going run's page: rendered at most once a second, never more than a
    # second behind the batches it stored (cache_keys.GOING_REFRESH_SECONDS).
    run = columns.going_names, columns.going(found[0])
    return run, passes, cache_keys.going_moment()

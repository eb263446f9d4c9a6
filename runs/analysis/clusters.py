"""Failure clusters of a run: its errors and failing scores grouped by signature.

Signatures are stored when results and scores are written (``signatures``).
A finished run's clusters are counted in its stored result table
(``result_table``), which names their first results too; a run still going
is grouped with GROUP BY in the database, where only the biggest clusters and
a few items of each are read. A cluster's *key* names it everywhere (the results
filter, retry, save as dataset): an error cluster is keyed by its error
signature, a failing-score cluster by ``score:<scorer>:<signature>``;
``cluster_keys.cluster_filter`` is the one definition of which results belong
to a key.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from django.db.models import (
    Count,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import RowNumber

from runs.analysis.cluster_keys import (
    score_cluster_key,
)
from runs.analysis.cluster_moves import Move, cluster_moves, cluster_pattern
from runs.analysis.result_table import ResultTable, run_result_table
from runs.models import Result, Run, Score
from runs.records import cache_keys, single_flight
from runs.records.signatures import (
    SCORE_ERRORED,
    SCORE_FAILED,
    score_pattern,
)

ITEMS_PER_CLUSTER = 5
MAX_ITEMS_PER_CLUSTER = 100
MAX_CLUSTERS = 50
# Groups read in one query; beyond it (masking gone wrong), counted apart.
GROUP_CAP = 1_000
# A failing-score cluster of at least 1 / DENSE of the run's results.
DENSE = 50
CACHE_SECONDS = 600

NEW, GROWN, SHRUNK, SAME, VANISHED = "new", "grown", "shrunk", "same", "vanished"

# -- clusters ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterItem:
    result_id: int
    index: int
    epoch: int
    external_id: str


@dataclass(slots=True, kw_only=True)
class ComparedCluster:
    """A cluster of a run, beside the baseline's cluster it was matched with:
    what a cluster by signature and one by content both show."""

    key: str
    count: int
    share: float | None
    baseline_count: int | None = None
    change: str | None = None
    items: list[ClusterItem] = field(default_factory=list)
    # Of a shrunk or vanished cluster: where the baseline's results went.
    moves: list[Move] = field(default_factory=list)

    @property
    def fewer(self) -> int:
        return max(0, (self.baseline_count or 0) - self.count)


@dataclass(slots=True, kw_only=True)
class Cluster(ComparedCluster):
    signature: str
    kind: str
    error_type: str
    pattern: str
    example: str
    scorer: str | None = None

    @property
    def errors_only(self) -> bool:
        """Errors, not failing verdicts: a retry may run them again."""
        return self.kind != SCORE_FAILED


@dataclass(frozen=True, slots=True)
class RunClusters:
    run: Run
    baseline: Run | None
    results: int
    errors: list[Cluster]
    failed_scores: list[Cluster]
    # How many clusters there are in all (only the biggest are listed).
    error_clusters: int
    failed_score_clusters: int


def change_of(count: int, baseline_count: int) -> str:
    if not baseline_count:
        return NEW
    if not count:
        return VANISHED
    if count > baseline_count:
        return GROWN
    if count < baseline_count:
        return SHRUNK
    return SAME


def share_of(count: int, results: int) -> float | None:
    """A cluster's share of the run's results (None without results)."""
    return count / results if results else None


Key = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Family:
    """Errors or failing scores: which rows fail, how they group, their items."""

    name: str
    failing: Callable[[Run], QuerySet[Any]]
    # The failing rows of some results, by id (results of one run's table).
    failing_of: Callable[[list[int]], QuerySet[Any]]
    group_by: tuple[str, ...]
    # The path from a failing row to its result ("" when it is the result).
    result: str
    result_id: str
    # The item columns besides its place, by the names ClusterItem and the
    # cluster builders use.
    details: dict[str, str]
    # First items by one indexed query per cluster (else one ranking query).
    items_per_group_query: bool

    @property
    def item_order(self) -> tuple[str, str]:
        # (item, epoch) is unique in a run: the order is total, and an index's.
        return (f"{self.result}item_index", f"{self.result}epoch")

    @property
    def item_fields(self) -> dict[str, str]:
        index, epoch = self.item_order
        return {
            "result_id": self.result_id,
            "index": index,
            "epoch": epoch,
            "external_id": f"{self.result}item__external_id",
            **self.details,
        }

    def key_of(self, row: dict[str, Any]) -> Key:
        return tuple(row[name] for name in self.group_by)

    def where(self, key: Key) -> Q:
        return Q(**dict(zip(self.group_by, key, strict=True)))

    def having(self, keys: list[Key]) -> Q:
        wanted = Q(pk__in=[])
        for key in keys:
            wanted |= self.where(key)
        return wanted


# A signature is a hash of the kind, the type and the pattern: any row of a
# group has the group's, and the groups are counted on an index alone.
ERRORS = _Family(
    name="errors",
    # "> ''", not "<> ''": a range of the (run, error_signature) index, the
    # errors alone, where "<>" reads every result of the run.
    failing=lambda run: Result.objects.filter(run=run, error_signature__gt=""),
    failing_of=lambda ids: Result.objects.filter(pk__in=ids, error_signature__gt=""),
    group_by=("error_signature",),
    result="",
    result_id="pk",
    details={
        "message": "error_message",
        "error": "error_message",
        "kind": "error_kind",
        "error_type": "error_type",
        "pattern": "error_pattern",
    },
    items_per_group_query=True,
)
# Only failing scores have a reason signature (signatures.score_signature).
FAILING_SCORES = _Family(
    name="scores",
    failing=lambda run: Score.objects.filter(result__run=run).exclude(
        reason_signature=""
    ),
    failing_of=lambda ids: Score.objects.filter(result_id__in=ids).exclude(
        reason_signature=""
    ),
    group_by=("scorer", "reason_signature"),
    result="result__",
    result_id="result_id",
    details={"message": "reason", "error": "error"},
    items_per_group_query=False,
)


@dataclass(frozen=True, slots=True)
class _Groups:
    """A run's groups, biggest first; ``complete`` when none was left out.

    Read from the run's result table, the biggest groups name their first
    results too (``first_ids``, in dataset order).
    """

    rows: dict[Key, dict[str, Any]]
    complete: bool
    first_ids: dict[Key, list[int]] | None = None


def _groups(family: _Family, run: Run, keys: list[Key] | None = None) -> _Groups:
    if keys is None and (table := run_result_table(run=run)) is not None:
        return _table_groups(family, table)
    rows = family.failing(run)
    if keys is not None:
        rows = rows.filter(family.having(keys))
    found = list(
        rows.values(*family.group_by)
        .annotate(count=Count("pk"))
        .order_by("-count", *family.group_by)[: GROUP_CAP + 1]
    )
    return _Groups(
        rows={family.key_of(row): row for row in found[:GROUP_CAP]},
        complete=len(found) <= GROUP_CAP,
    )


def _table_groups(family: _Family, table: ResultTable) -> _Groups:
    """Every group of a finished run, counted in its result table."""
    members: dict[Key, np.ndarray]
    if family is ERRORS:
        members = {(key,): rows for key, rows in table.error_groups().items()}
    else:
        members = {key: rows for key, rows in table.reason_groups().items()}
    ordered = sorted(members.items(), key=lambda pair: (-len(pair[1]), pair[0]))
    return _Groups(
        rows={
            key: {**dict(zip(family.group_by, key, strict=True)), "count": len(rows)}
            for key, rows in ordered
        },
        complete=True,
        first_ids={
            key: table.ids[rows[:MAX_ITEMS_PER_CLUSTER]].tolist()
            for key, rows in ordered[:MAX_CLUSTERS]
        },
    )


def _groups_cached(family: _Family, run: Run) -> _Groups:
    """A run's groups, kept under its results version: a baseline is often
    compared again and again, and it has usually finished."""
    key = cache_keys.run_cluster_groups(family.name, run)
    return single_flight.cached(key, lambda: _groups(family, run), CACHE_SECONDS)


def _counts(
    family: _Family, run: Run, groups: _Groups, keys: list[Key]
) -> dict[Key, int]:
    """The run's count of each of ``keys`` (0 for a key it does not have)."""
    counts = {key: groups.rows[key]["count"] for key in keys if key in groups.rows}
    missing = [key for key in keys if key not in counts]
    if missing and not groups.complete:
        for key, row in _groups(family, run, missing).rows.items():
            counts[key] = row["count"]
    return {key: counts.get(key, 0) for key in keys}


def _total(family: _Family, run: Run, groups: _Groups) -> int:
    if groups.complete:
        return len(groups.rows)
    return family.failing(run).values(*family.group_by).distinct().order_by().count()


def _first_items(
    family: _Family, run: Run, groups: _Groups, keys: list[Key], limit: int
) -> dict[Key, list[dict[str, Any]]]:
    """The first ``limit`` rows of each group, in dataset order."""
    if not keys or limit < 1:
        return {}
    fields = {**family.item_fields, **{name: name for name in family.group_by}}
    if groups.first_ids is not None:
        return _first_items_by_id(family, groups.first_ids, keys, limit, fields)
    if family.items_per_group_query:
        queries = [family.failing(run).filter(family.where(key)) for key in keys]
        rows = [
            row
            for query in queries
            for row in query.order_by(*family.item_order).values(*fields.values())[
                :limit
            ]
        ]
    else:
        # A group that holds a good part of the run is met early in dataset
        # order; the others are ranked together in one query.
        dense = [k for k in keys if groups.rows[k]["count"] * DENSE >= run.processed]
        rows = [row for key in dense for row in _first_scores(run, key, limit)]
        sparse = [key for key in keys if key not in dense]
        if sparse:
            rows += _ranked(family, run, sparse, limit, fields)
    grouped: dict[Key, list[dict[str, Any]]] = {}
    for row in rows:
        named = {name: row[column] for name, column in fields.items()}
        grouped.setdefault(family.key_of(named), []).append(named)
    return grouped


def _first_items_by_id(
    family: _Family,
    first_ids: dict[Key, list[int]],
    keys: list[Key],
    limit: int,
    fields: dict[str, str],
) -> dict[Key, list[dict[str, Any]]]:
    """The first ``limit`` rows of each group, named by their result ids: one
    query by id for all of them."""
    wanted = {(key, pk) for key in keys for pk in first_ids.get(key, [])[:limit]}
    # By id alone: no condition on the run, that a plan could start from.
    rows = (
        family.failing_of(sorted({pk for _, pk in wanted}))
        .order_by(*family.item_order)
        .values(*fields.values())
    )
    grouped: dict[Key, list[dict[str, Any]]] = {}
    for row in rows:
        named = {name: row[column] for name, column in fields.items()}
        key = family.key_of(named)
        # A result in two groups (two scorers failing) is listed in those
        # whose first results it is.
        if (key, named["result_id"]) in wanted:
            grouped.setdefault(key, []).append(named)
    return grouped


def _first_scores(run: Run, key: Key, limit: int) -> list[dict[str, Any]]:
    """The first results of the run, in dataset order, with the failing score
    ``key``; read in the order of an index, so it stops after ``limit``."""
    scorer, signature = key
    score = Score.objects.filter(
        result=OuterRef("pk"), scorer=scorer, reason_signature=signature
    ).order_by()
    return [
        {
            "result_id": row["pk"],
            "result__item_index": row["item_index"],
            "result__epoch": row["epoch"],
            "result__item__external_id": row["item__external_id"],
            "reason": row["score_reason"],
            "error": row["score_error"],
            "scorer": scorer,
            "reason_signature": signature,
        }
        for row in Result.objects.filter(Exists(score), run=run)
        .annotate(
            score_reason=Subquery(score.values("reason")[:1]),
            score_error=Subquery(score.values("error")[:1]),
        )
        .order_by("item_index", "epoch")
        .values(
            "pk",
            "item_index",
            "epoch",
            "item__external_id",
            "score_reason",
            "score_error",
        )[:limit]
    ]


def _ranked(
    family: _Family, run: Run, keys: list[Key], limit: int, fields: dict[str, str]
) -> list[dict[str, Any]]:
    """The first ``limit`` rows of each group, ranked in one query on the
    columns the ranking needs; the columns shown are read for the rows kept."""
    rank = Window(
        RowNumber(),
        partition_by=[F(name) for name in family.group_by],
        order_by=[F(name).asc() for name in family.item_order],
    )
    kept = (
        family.failing(run)
        .filter(family.having(keys))
        .order_by()
        .annotate(rank=rank)
        .filter(rank__lte=limit)
        .values_list("pk", flat=True)
    )
    return list(
        family.failing(run)
        .filter(pk__in=list(kept))
        .order_by(*family.item_order)
        .values(*fields.values())
    )


def _item(row: dict[str, Any]) -> ClusterItem:
    return ClusterItem(
        result_id=row["result_id"],
        index=row["index"],
        epoch=row["epoch"],
        external_id=row["external_id"],
    )


def _error_cluster(group: dict[str, Any], rows: list[dict[str, Any]]) -> Cluster:
    signature = group["error_signature"]
    first = rows[0] if rows else {}
    return Cluster(
        key=signature,
        signature=signature,
        kind=first.get("kind", ""),
        error_type=first.get("error_type", ""),
        pattern=first.get("pattern", ""),
        example=first.get("message", ""),
        count=group["count"],
        share=None,
        items=[_item(row) for row in rows],
    )


def _score_cluster(group: dict[str, Any], rows: list[dict[str, Any]]) -> Cluster:
    scorer, signature = group["scorer"], group["reason_signature"]
    first = rows[0] if rows else {}
    error, reason = first.get("error", ""), first.get("message", "")
    example = error or reason
    return Cluster(
        key=score_cluster_key(scorer, signature),
        signature=signature,
        # A signature is of an error or of a verdict, never of both.
        kind=SCORE_ERRORED if first.get("error") else SCORE_FAILED,
        error_type="",
        pattern=score_pattern(reason=reason, error=error) if first else "",
        example=example,
        count=group["count"],
        share=None,
        scorer=scorer,
        items=[_item(row) for row in rows],
    )


def _clusters(
    family: _Family,
    make: Callable[[dict[str, Any], list[dict[str, Any]]], Cluster],
    *,
    run: Run,
    baseline: Run | None,
    results: int,
    items_per_cluster: int,
) -> tuple[list[Cluster], int]:
    groups = _groups(family, run)
    shown = list(groups.rows)[:MAX_CLUSTERS]
    items = _first_items(family, run, groups, shown, max(items_per_cluster, 1))
    clusters = []
    for key in shown:
        cluster = make(groups.rows[key], items.get(key, []))
        cluster.items = cluster.items[:items_per_cluster]
        cluster.share = share_of(cluster.count, results)
        clusters.append(cluster)
    if baseline is not None:
        theirs = _groups_cached(family, baseline)
        before = _counts(family, baseline, theirs, shown)
        for key, cluster in zip(shown, clusters, strict=True):
            cluster.baseline_count = before[key]
            cluster.change = change_of(cluster.count, before[key])
        # The baseline's biggest clusters that this run does not have at all.
        candidates = list(theirs.rows)[:MAX_CLUSTERS]
        ours = _counts(family, run, groups, candidates)
        gone = [key for key in candidates if not ours[key]]
        examples = _first_items(family, baseline, theirs, gone, 1)
        for key in gone:
            cluster = make(theirs.rows[key], examples.get(key, []))
            cluster.items, cluster.count, cluster.share = [], 0, 0.0
            cluster.baseline_count = theirs.rows[key]["count"]
            cluster.change = VANISHED
            clusters.append(cluster)
    return clusters, _total(family, run, groups)


def _explain_shrinking(run: Run, baseline: Run, found: RunClusters) -> None:
    """Give each shrunk or vanished cluster its moves, named by pattern."""
    patterns = {c.key: c.pattern for c in found.errors + found.failed_scores}
    for cluster in found.errors + found.failed_scores:
        if cluster.change not in (SHRUNK, VANISHED) or not cluster.baseline_count:
            continue
        moves = cluster_moves(
            run=run, baseline=baseline, key=cluster.key, before=cluster.baseline_count
        )
        for number, move in enumerate(moves):
            if move.key and move.key not in patterns:
                patterns[move.key] = cluster_pattern(run, move.key)
            moves[number] = replace(move, pattern=patterns.get(move.key, ""))
        cluster.moves = moves


def run_clusters(
    *,
    run: Run,
    baseline: Run | None = None,
    items_per_cluster: int = ITEMS_PER_CLUSTER,
) -> RunClusters:
    """The run's error and failing-score clusters, biggest first.

    Against a baseline, each cluster says whether it is new, grown, shrunk or
    the same (by count), and the baseline's clusters this run no longer has
    follow as vanished; a shrunk or vanished one says where its baseline
    results went (passing, another cluster such as a timeout, missing).
    Shares are of the run's stored results.
    """
    common = functools.partial(
        _clusters,
        run=run,
        baseline=baseline,
        results=run.processed,
        items_per_cluster=items_per_cluster,
    )
    errors, error_total = common(ERRORS, _error_cluster)
    scores, score_total = common(FAILING_SCORES, _score_cluster)
    found = RunClusters(
        run=run,
        baseline=baseline,
        results=run.processed,
        errors=errors,
        failed_scores=scores,
        error_clusters=error_total,
        failed_score_clusters=score_total,
    )
    if baseline is not None:
        _explain_shrinking(run, baseline, found)
    return found


def run_clusters_cached(
    *,
    run: Run,
    baseline: Run | None = None,
    items_per_cluster: int = ITEMS_PER_CLUSTER,
) -> RunClusters:
    """``run_clusters``, kept under the results versions of both runs."""
    key = cache_keys.run_clusters(run, baseline, items_per_cluster)
    return single_flight.cached(
        key,
        lambda: run_clusters(
            run=run, baseline=baseline, items_per_cluster=items_per_cluster
        ),
        CACHE_SECONDS,
    )

"""Failure clusters of a run: its errors and failing scores grouped by signature.

Computed with GROUP BY in the database (signatures are stored when results and
scores are written, see ``signatures``); only the biggest clusters and a few
items of each are read. A cluster's *key* names it everywhere (the results
filter, retry, save as dataset): an error cluster is keyed by its error
signature, a failing-score cluster by ``score:<scorer>:<signature>``;
``cluster_filter`` is the one definition of which results belong to a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Exists, F, Min, OuterRef, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from runs.analysis.signatures import (
    FAILING_SCORE,
    SCORE_ERRORED,
    SCORE_FAILED,
    SIGNATURE_LENGTH,
    mask,
)
from runs.errors import InvalidInput
from runs.models import Result, Run, Score

ITEMS_PER_CLUSTER = 5
MAX_ITEMS_PER_CLUSTER = 100
MAX_CLUSTERS = 50
CACHE_SECONDS = 600
SCORE_KEY_PREFIX = "score:"

NEW, GROWN, SHRUNK, SAME, VANISHED = "new", "grown", "shrunk", "same", "vanished"

_SIGNATURE = re.compile(rf"[0-9a-f]{{{SIGNATURE_LENGTH}}}")


# -- keys ----------------------------------------------------------------------


def score_cluster_key(scorer: str, signature: str) -> str:
    return f"{SCORE_KEY_PREFIX}{scorer}:{signature}"


def parse_cluster_key(key: str) -> tuple[str | None, str]:
    """``(scorer, signature)`` of a key; the scorer is None for an error cluster.

    Raises InvalidInput (field ``cluster``) for anything else.
    """
    scorer: str | None = None
    signature = key
    if key.startswith(SCORE_KEY_PREFIX):
        scorer, _, signature = key[len(SCORE_KEY_PREFIX) :].rpartition(":")
        if not scorer:
            raise InvalidInput(
                "a failing-score cluster is score:<scorer>:<signature>",
                field="cluster",
            )
    if not _SIGNATURE.fullmatch(signature):
        raise InvalidInput(
            f"not a cluster: a signature is {SIGNATURE_LENGTH} hexadecimal digits",
            field="cluster",
        )
    return scorer, signature


def cluster_filter(key: str) -> Q:
    """The results that belong to the cluster ``key`` (over ``Result``)."""
    scorer, signature = parse_cluster_key(key)
    if scorer is None:
        return Q(error_signature=signature)
    failing = Score.objects.filter(
        FAILING_SCORE,
        result=OuterRef("pk"),
        scorer=scorer,
        reason_signature=signature,
    )
    return Q(Exists(failing))


# -- clusters ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterItem:
    result_id: int
    index: int
    epoch: int
    external_id: str


@dataclass(slots=True)
class Cluster:
    key: str
    signature: str
    kind: str
    error_type: str
    pattern: str
    example: str
    count: int
    share: float | None
    baseline_count: int | None = None
    change: str | None = None
    scorer: str | None = None
    items: list[ClusterItem] = field(default_factory=list)


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


def _share(count: int, results: int) -> float | None:
    return count / results if results else None


def _errored(run: Run) -> QuerySet[Result]:
    return Result.objects.filter(run=run).exclude(error_signature="")


def _failing_scores(run: Run) -> QuerySet[Score]:
    return Score.objects.filter(FAILING_SCORE, result__run=run)


def _error_groups(run: Run, *, signatures: list[str] | None = None) -> list[dict]:
    rows = _errored(run)
    if signatures is not None:
        rows = rows.filter(error_signature__in=signatures)
    return list(
        rows.values("error_signature")
        .annotate(
            count=Count("pk"),
            kind=Min("error_kind"),
            error_type=Min("error_type"),
            pattern=Min("error_pattern"),
        )
        .order_by("-count", "error_signature")[:MAX_CLUSTERS]
    )


def _score_groups(
    run: Run, *, keys: list[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    rows = _failing_scores(run)
    if keys is not None:
        wanted = Q(pk__in=[])
        for scorer, signature in keys:
            wanted |= Q(scorer=scorer, reason_signature=signature)
        rows = rows.filter(wanted)
    return list(
        rows.values("scorer", "reason_signature")
        .annotate(count=Count("pk"), errored=Count("pk", filter=~Q(error="")))
        .order_by("-count", "scorer", "reason_signature")[:MAX_CLUSTERS]
    )


def _error_items(
    run: Run, signatures: list[str], limit: int
) -> dict[str, list[dict[str, Any]]]:
    """The first ``limit`` results of each signature, in dataset order."""
    if not signatures or limit < 1:
        return {}
    rank = Window(
        RowNumber(),
        partition_by=[F("error_signature")],
        order_by=[F("item_index").asc(), F("epoch").asc(), F("pk").asc()],
    )
    rows = (
        Result.objects.filter(run=run, error_signature__in=signatures)
        .annotate(rank=rank)
        .filter(rank__lte=limit)
        .values(
            "pk",
            "error_signature",
            "item_index",
            "epoch",
            "item__external_id",
            "error_message",
            "rank",
        )
        .order_by("error_signature", "rank")
    )
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["error_signature"], []).append(row)
    return grouped


def _score_items(
    run: Run, keys: list[tuple[str, str]], limit: int
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    if not keys or limit < 1:
        return {}
    rank = Window(
        RowNumber(),
        partition_by=[F("scorer"), F("reason_signature")],
        order_by=[
            F("result__item_index").asc(),
            F("result__epoch").asc(),
            F("pk").asc(),
        ],
    )
    wanted = Q(pk__in=[])
    for scorer, signature in keys:
        wanted |= Q(scorer=scorer, reason_signature=signature)
    rows = (
        _failing_scores(run)
        .filter(wanted)
        .annotate(rank=rank)
        .filter(rank__lte=limit)
        .values(
            "scorer",
            "reason_signature",
            "result_id",
            "result__item_index",
            "result__epoch",
            "result__item__external_id",
            "reason",
            "error",
            "rank",
        )
        .order_by("scorer", "reason_signature", "rank")
    )
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault((row["scorer"], row["reason_signature"]), []).append(row)
    return grouped


def _error_clusters(
    run: Run, baseline: Run | None, results: int, items_per_cluster: int
) -> tuple[list[Cluster], int]:
    groups = _error_groups(run)
    signatures = [g["error_signature"] for g in groups]
    items = _error_items(run, signatures, max(items_per_cluster, 1))
    clusters = []
    for group in groups:
        signature = group["error_signature"]
        rows = items.get(signature, [])
        clusters.append(
            Cluster(
                key=signature,
                signature=signature,
                kind=group["kind"],
                error_type=group["error_type"],
                pattern=group["pattern"],
                example=rows[0]["error_message"] if rows else "",
                count=group["count"],
                share=_share(group["count"], results),
                items=[_result_item(row) for row in rows[:items_per_cluster]],
            )
        )
    total = _errored(run).values("error_signature").distinct().count()
    if baseline is not None:
        _compare_errors(clusters, run, baseline)
    return clusters, total


def _compare_errors(clusters: list[Cluster], run: Run, baseline: Run) -> None:
    shown = [c.signature for c in clusters]
    before = {
        g["error_signature"]: g["count"]
        for g in _error_groups(baseline, signatures=shown)
    }
    for cluster in clusters:
        cluster.baseline_count = before.get(cluster.signature, 0)
        cluster.change = change_of(cluster.count, cluster.baseline_count)
    # The baseline's biggest clusters that this run does not have at all.
    theirs = _error_groups(baseline)
    present = set(
        _errored(run)
        .filter(error_signature__in=[g["error_signature"] for g in theirs])
        .values_list("error_signature", flat=True)
        .distinct()
    )
    gone = [g for g in theirs if g["error_signature"] not in present]
    items = _error_items(baseline, [g["error_signature"] for g in gone], 1)
    for group in gone:
        signature = group["error_signature"]
        rows = items.get(signature, [])
        clusters.append(
            Cluster(
                key=signature,
                signature=signature,
                kind=group["kind"],
                error_type=group["error_type"],
                pattern=group["pattern"],
                example=rows[0]["error_message"] if rows else "",
                count=0,
                share=0.0,
                baseline_count=group["count"],
                change=VANISHED,
            )
        )


def _result_item(row: dict[str, Any]) -> ClusterItem:
    return ClusterItem(
        result_id=row["pk"],
        index=row["item_index"],
        epoch=row["epoch"],
        external_id=row["item__external_id"],
    )


def _score_item(row: dict[str, Any]) -> ClusterItem:
    return ClusterItem(
        result_id=row["result_id"],
        index=row["result__item_index"],
        epoch=row["result__epoch"],
        external_id=row["result__item__external_id"],
    )


def _score_cluster(
    group: dict[str, Any], rows: list[dict[str, Any]], results: int
) -> Cluster:
    scorer, signature = group["scorer"], group["reason_signature"]
    errored = bool(group.get("errored"))
    example = ""
    if rows:
        example = rows[0]["error"] or rows[0]["reason"]
    return Cluster(
        key=score_cluster_key(scorer, signature),
        signature=signature,
        kind=SCORE_ERRORED if errored else SCORE_FAILED,
        error_type="",
        pattern=mask(example),
        example=example,
        count=group["count"],
        share=_share(group["count"], results),
        scorer=scorer,
        items=[_score_item(row) for row in rows],
    )


def _score_clusters(
    run: Run, baseline: Run | None, results: int, items_per_cluster: int
) -> tuple[list[Cluster], int]:
    groups = _score_groups(run)
    keys = [(g["scorer"], g["reason_signature"]) for g in groups]
    items = _score_items(run, keys, max(items_per_cluster, 1))
    clusters = []
    for group, key in zip(groups, keys, strict=True):
        cluster = _score_cluster(group, items.get(key, []), results)
        cluster.items = cluster.items[:items_per_cluster]
        clusters.append(cluster)
    total = _failing_scores(run).values("scorer", "reason_signature").distinct().count()
    if baseline is not None:
        before = {
            (g["scorer"], g["reason_signature"]): g["count"]
            for g in _score_groups(baseline, keys=keys)
        }
        for cluster, key in zip(clusters, keys, strict=True):
            cluster.baseline_count = before.get(key, 0)
            cluster.change = change_of(cluster.count, cluster.baseline_count)
        theirs = _score_groups(baseline)
        their_keys = [(g["scorer"], g["reason_signature"]) for g in theirs]
        present = {
            (g["scorer"], g["reason_signature"])
            for g in _score_groups(run, keys=their_keys)
        }
        gone = [(g, k) for g, k in zip(theirs, their_keys, strict=True)]
        gone = [(g, k) for g, k in gone if k not in present]
        examples = _score_items(baseline, [k for _, k in gone], 1)
        for group, key in gone:
            cluster = _score_cluster(group, examples.get(key, []), results)
            cluster.items = []
            cluster.count, cluster.share = 0, 0.0
            cluster.baseline_count, cluster.change = group["count"], VANISHED
            clusters.append(cluster)
    return clusters, total


def run_clusters(
    *,
    run: Run,
    baseline: Run | None = None,
    items_per_cluster: int = ITEMS_PER_CLUSTER,
) -> RunClusters:
    """The run's error and failing-score clusters, biggest first.

    Against a baseline, each cluster says whether it is new, grown, shrunk or
    the same (by count), and the baseline's clusters this run no longer has
    follow as vanished. Shares are of the run's stored results.
    """
    results = run.processed
    errors, error_total = _error_clusters(run, baseline, results, items_per_cluster)
    scores, score_total = _score_clusters(run, baseline, results, items_per_cluster)
    return RunClusters(
        run=run,
        baseline=baseline,
        results=results,
        errors=errors,
        failed_scores=scores,
        error_clusters=error_total,
        failed_score_clusters=score_total,
    )


def run_clusters_cached(
    *,
    run: Run,
    baseline: Run | None = None,
    items_per_cluster: int = ITEMS_PER_CLUSTER,
) -> RunClusters:
    """``run_clusters``, kept under the results versions of both runs."""
    versions = [run.results_version, baseline.results_version if baseline else "-"]
    key = f"run-clusters:{':'.join(versions)}:{items_per_cluster}"
    clusters = cache.get(key)
    if clusters is None:
        clusters = run_clusters(
            run=run, baseline=baseline, items_per_cluster=items_per_cluster
        )
        cache.set(key, clusters, CACHE_SECONDS)
    return clusters

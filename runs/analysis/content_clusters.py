"""Failure clusters by content: a run's failing items grouped by what they hold.

The clusters of ``clusters.py`` group failures by their masked error or score
reason; on an arithmetic run most failures share one reason ("answer <n> does
not equal expected <n>"), which says nothing of why. These group the failing
results (an error, or a failing score; not those stopped in flight, which are
no sample) by the text of their item's input, their output and the item's
expected answer: TF-IDF vectors, or the project's embeddings endpoint when it
names one (``embeddings.py``), clustered without a preset number of clusters
and named by their distinctive terms (``content_vectors.py``), and, when the
run has an LLM judge, by a one-line title its model writes (``content_titles``).
Items that fit no cluster form the *unclustered* group, counted like the rest.

Computing them costs seconds for tens of thousands of items, so a finished
run's clusters are computed once per ``results_version`` and vectoriser, on
their first read, and stored (``RunContentClusters``) as its figures are (not
when the run ends, as its figures are: that would hold back the end of every
run with failures by seconds, for clusters nobody may ask for); a running
run's are kept in the cache under its results version.

A cluster's key is ``content:`` and a digest of its results: the results
filter, retry and save-as-dataset resolve it against the run's current
clusters (``content_members``), so a key of clusters computed before the
results changed is refused rather than read as other results.

Against a baseline run, clusters are matched by their items, (external id,
epoch) pairs so that runs of two versions of a dataset match too: the pair of
clusters with the highest Jaccard index is matched first, while it is at least
``MATCH_JACCARD``; clusters left over are matched by equal names (the same
distinctive terms); the unclustered groups match each other. A matched
cluster grew, shrank or stayed the same by count; an unmatched one is new;
the baseline's unmatched ones vanished, and a shrunk or vanished one says
where its baseline items are now (passing, in another cluster, not in the run).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q

from runs.analysis.cluster_keys import CONTENT_KEY_PREFIX
from runs.analysis.cluster_moves import CLUSTER, MISSING, PASSED, Move
from runs.analysis.clusters import (
    CACHE_SECONDS,
    ITEMS_PER_CLUSTER,
    NEW,
    SAME,
    SHRUNK,
    VANISHED,
    ClusterItem,
    ComparedCluster,
    change_of,
    share_of,
)
from runs.analysis.content_titles import cluster_titles
from runs.analysis.embeddings import EmbeddingsFailed, embed_texts, embeddings_label
from runs.analysis.summary import store_for_run
from runs.errors import InvalidInput
from runs.models import STOPPED_IN_FLIGHT, Result, Run, RunContentClusters, Score
from runs.records import cache_keys, single_flight
from runs.records.retries import retryable

logger = logging.getLogger(__name__)

# Raise when stored clusters change meaning: those of another format are
# computed again.
FORMAT = 1
MATCH_JACCARD = 0.3
# Items of a cluster shown to the judge that titles it.
TITLE_SAMPLE = 5

# A member as stored (a JSON list): result id, item index, epoch, external
# id, and whether a retry may run it.
Member = list[Any]


@dataclass(slots=True, kw_only=True)
class ContentCluster(ComparedCluster):
    terms: list[str]
    title: str
    unclustered: bool
    retryable: int
    # How it was matched in the baseline: the Jaccard index of their items,
    # or None when by name (or not matched).
    jaccard: float | None = None

    @property
    def name(self) -> str:
        if self.unclustered:
            return "unclustered"
        return self.title or " · ".join(self.terms) or "(no distinctive terms)"

    @property
    def errors_only(self) -> bool:
        """Every result of it is an error: a retry may run them again."""
        return bool(self.count) and self.retryable == self.count


@dataclass(frozen=True, slots=True)
class ContentClusters:
    run: Run
    baseline: Run | None
    results: int
    failing: int
    vectoriser: str
    note: str
    clusters: list[ContentCluster]
    unclustered: ContentCluster | None


# -- computing and storing ---------------------------------------------------------


def failing_results(run: Run) -> Any:
    """The run's failing results (an error or a failing score), not those
    stopped in flight, in dataset order."""
    failing_score = Score.objects.filter(result=OuterRef("pk")).exclude(
        reason_signature=""
    )
    return (
        Result.objects.filter(run=run)
        .filter(~Q(error_signature="") | Exists(failing_score))
        .exclude(STOPPED_IN_FLIGHT)
        .order_by("item_index", "epoch")
    )


def failing_rows(run: Run) -> list[tuple[Any, ...]]:
    """The failing results' id, item index, epoch, external id, whether a
    retry may run it, and the item's input, output and expected answer."""
    return list(
        failing_results(run)
        .annotate(can_retry=ExpressionWrapper(retryable(), BooleanField()))
        .values_list(
            "pk",
            "item_index",
            "epoch",
            "item__external_id",
            "can_retry",
            "item__input",
            "output",
            "item__expected",
        )
    )


def key_of(result_ids: Iterable[int]) -> str:
    digest = hashlib.blake2b(
        ",".join(map(str, sorted(result_ids))).encode(), digest_size=6
    )
    return CONTENT_KEY_PREFIX + digest.hexdigest()


def _version(run: Run, vectoriser: str) -> str:
    label = hashlib.blake2b(vectoriser.encode(), digest_size=6).hexdigest()
    # A finished run's exact results_version (its clusters are stored under
    # it); a going run's second (cache_keys.results_version).
    return f"{FORMAT}:{label}:{cache_keys.results_version(run)}"


def compute(run: Run) -> dict[str, Any]:
    """The run's content clusters, as stored (JSON)."""
    # Imported here: scikit-learn takes seconds to import, paid only by
    # those who compute content clusters.
    from runs.analysis.content_vectors import NOISE, group_texts, item_text

    rows = failing_rows(run)
    texts = [item_text(*row[5:]) for row in rows]
    config = run.project.embeddings
    vectoriser, note, vectors = "tfidf", "", None
    if config and texts:
        try:
            vectors = embed_texts(project_id=run.project_id, config=config, texts=texts)
            vectoriser = embeddings_label(config)
        except EmbeddingsFailed as exc:
            note = f"the embeddings endpoint failed ({exc}); clustered by TF-IDF"
    grouping = group_texts(texts, vectors)
    members: list[list[Member]] = [[] for _ in range(grouping.clusters)]
    noise: list[Member] = []
    for row, label in zip(rows, grouping.labels.tolist(), strict=True):
        member: Member = [row[0], row[1], row[2], row[3], bool(row[4])]
        (noise if label == NOISE else members[label]).append(member)
    samples = [
        [texts[i] for i in _sample_positions(grouping.labels, n)]
        for n in range(grouping.clusters)
    ]
    titles, title_note = cluster_titles(run=run, samples=samples)
    return {
        "vectoriser": vectoriser,
        "note": "; ".join(filter(None, [note, title_note])),
        "failing": len(rows),
        "clusters": [
            {
                "key": key_of(m[0] for m in group),
                "terms": terms,
                "title": title,
                "members": group,
            }
            for group, terms, title in zip(members, grouping.terms, titles, strict=True)
        ],
        "unclustered": {"key": key_of(m[0] for m in noise), "members": noise},
    }


def _sample_positions(labels: Any, label: int, size: int = TITLE_SAMPLE) -> list[int]:
    """``size`` of the cluster's items, spread over it (in dataset order)."""
    positions = (labels == label).nonzero()[0]
    step = max(1, len(positions) // size)
    return [int(i) for i in positions[::step][:size]]


def content_clustering(run: Run) -> dict[str, Any]:
    """The run's content clusters as stored: computed once per results
    version and vectoriser (stored for a finished run, cached otherwise)."""
    vectoriser = embeddings_label(run.project.embeddings)
    version = _version(run, vectoriser)
    key = cache_keys.run_content_clusters(run, version)
    return single_flight.cached(
        key, lambda: _stored_or_computed(run, vectoriser, version), CACHE_SECONDS
    )


def _stored_or_computed(run: Run, vectoriser: str, version: str) -> dict[str, Any]:
    data = None
    if run.is_final:
        data = (
            RunContentClusters.objects.filter(run=run, version=version)
            .values_list("data", flat=True)
            .first()
        )
    if data is None:
        began = time.perf_counter()
        data = compute(run)
        # Clusters that fell back to TF-IDF are not kept past the cache: the
        # endpoint may answer next time.
        if run.is_final and data["vectoriser"] == vectoriser:
            store_for_run(
                RunContentClusters,
                run,
                version=version,
                data=data,
                compute_seconds=time.perf_counter() - began,
            )
    return data


def content_members(*, run: Run, key: str) -> list[int]:
    """The result ids of the run's current content cluster ``key``;
    InvalidInput (field ``cluster``) when it has none of that key."""
    data = content_clustering(run)
    for group in [*data["clusters"], data["unclustered"]]:
        if group["key"] == key:
            return [member[0] for member in group["members"]]
    raise InvalidInput(
        "no content cluster of this key in the run: its clusters are computed "
        "again when its results change; reload them",
        field="cluster",
    )


# -- what a page and the API show --------------------------------------------------


def _cluster(
    group: dict[str, Any], results: int, items: int, *, unclustered: bool = False
) -> ContentCluster:
    members = group["members"]
    return ContentCluster(
        key=group["key"],
        terms=list(group.get("terms", [])),
        title=group.get("title", ""),
        unclustered=unclustered,
        count=len(members),
        retryable=sum(1 for m in members if m[4]),
        share=share_of(len(members), results),
        items=[ClusterItem(m[0], m[1], m[2], m[3]) for m in members[:items]],
    )


Identity = tuple[str, int]


def _identities(group: dict[str, Any]) -> set[Identity]:
    return {(m[3], m[2]) for m in group["members"]}


def _matches(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]]
) -> dict[int, tuple[int, float | None]]:
    """Our cluster's position -> (the baseline's position, Jaccard or None
    when matched by name)."""
    mine = [_identities(group) for group in ours]
    other = [_identities(group) for group in theirs]
    pairs = []
    for i, a in enumerate(mine):
        for j, b in enumerate(other):
            shared = len(a & b)
            if shared:
                pairs.append((shared / len(a | b), i, j))
    matched: dict[int, tuple[int, float | None]] = {}
    taken: set[int] = set()
    for jaccard, i, j in sorted(pairs, key=lambda p: (-p[0], p[1], p[2])):
        if jaccard < MATCH_JACCARD:
            break
        if i not in matched and j not in taken:
            matched[i] = (j, round(jaccard, 4))
            taken.add(j)
    names: dict[tuple[str, ...], int] = {}
    for j, group in enumerate(theirs):
        if j not in taken and group["terms"]:
            names.setdefault(tuple(group["terms"]), j)
    for i, group in enumerate(ours):
        same = names.get(tuple(group["terms"])) if group["terms"] else None
        if i not in matched and same is not None and same not in taken:
            matched[i] = (same, None)
            taken.add(same)
    return matched


def _moves(
    before: dict[str, Any],
    key: str,
    where: dict[Identity, str],
    present: set[Identity],
) -> list[Move]:
    """Where the baseline cluster's items are in the run: another cluster
    of it, passing (a result not failing), or not in it."""
    counts: Counter[tuple[str, str]] = Counter()
    for identity in _identities(before):
        now = where.get(identity)
        if now == key:
            continue
        if now is not None:
            counts[CLUSTER, now] += 1
        elif identity in present:
            counts[PASSED, ""] += 1
        else:
            counts[MISSING, ""] += 1
    moves = [Move(to, count, other) for (to, other), count in counts.items()]
    return sorted(moves, key=lambda move: (-move.count, move.to, move.key))


def _compare(
    run: Run,
    found: list[ContentCluster],
    ours: list[dict[str, Any]],
    theirs: list[dict[str, Any]],
) -> list[ContentCluster]:
    """Give each cluster its change; the baseline's unmatched ones follow as
    vanished; shrunk and vanished ones say where their items went."""
    # The unclustered groups (last of each) match each other.
    matched = _matches(ours[:-1], theirs[:-1])
    matched[len(ours) - 1] = (len(theirs) - 1, None)
    for i, cluster in enumerate(found):
        j, jaccard = matched.get(i, (None, None))
        before = len(theirs[j]["members"]) if j is not None else 0
        cluster.baseline_count, cluster.jaccard = before, jaccard
        if j is None:
            cluster.change = NEW
        else:  # two empty unclustered groups are the same
            cluster.change = (
                change_of(cluster.count, before) if before or cluster.count else SAME
            )
    taken = {j for j, _ in matched.values()}
    for j, group in enumerate(theirs):
        if j not in taken:
            gone = _cluster(group, 0, 0)
            gone.baseline_count, gone.count, gone.share = gone.count, 0, 0.0
            gone.retryable, gone.change = 0, VANISHED
            found.append(gone)
            matched[len(found) - 1] = (j, None)
    if not any(c.change in (SHRUNK, VANISHED) for c in found):
        return found
    where = {
        identity: cluster["key"]
        for cluster in ours
        for identity in _identities(cluster)
    }
    present = set(
        Result.objects.filter(run=run)
        .exclude(STOPPED_IN_FLIGHT)
        .values_list("item__external_id", "epoch")
    )
    names = {c.key: c.name for c in found}
    for i, cluster in enumerate(found):
        if cluster.change in (SHRUNK, VANISHED) and i in matched:
            own = ours[i]["key"] if i < len(ours) else ""
            moves = _moves(theirs[matched[i][0]], own, where, present)
            cluster.moves = [
                Move(m.to, m.count, m.key, names.get(m.key, "")) for m in moves
            ]
    return found


def run_content_clusters(
    *,
    run: Run,
    baseline: Run | None = None,
    items_per_cluster: int = ITEMS_PER_CLUSTER,
) -> ContentClusters:
    """The run's failing items clustered by content, biggest first, with the
    unclustered ones apart; against a baseline, how each cluster moved."""
    data = content_clustering(run)
    results = run.processed
    groups = [*data["clusters"], data["unclustered"]]
    found = [
        _cluster(group, results, items_per_cluster, unclustered=group is groups[-1])
        for group in groups
    ]
    if baseline is not None:
        before = content_clustering(baseline)
        theirs = [*before["clusters"], before["unclustered"]]
        found = _compare(run, found, groups, theirs)
    unclustered = found.pop(len(groups) - 1)
    return ContentClusters(
        run=run,
        baseline=baseline,
        results=results,
        failing=data["failing"],
        vectoriser=data["vectoriser"],
        note=data["note"],
        clusters=[c for c in found if c.count or c.change == VANISHED],
        unclustered=unclustered,
    )

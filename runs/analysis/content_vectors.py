"""Grouping texts by what they say: vectors, clusters, and their names.

Plain functions over lists of texts (and, when an embeddings endpoint gave
them, vectors), used by ``content_clusters`` for a run's failing items and by
its bench. scikit-learn is imported here only, and this module only when
content clusters are computed: importing it costs a second or two that no
other page should pay.

- Vectors: TF-IDF over words of two letters or more (numbers, which differ in
  every arithmetic answer, are left out; so are English stop words, words of
  one item only and words of more than ``MAX_SHARE`` of them), reduced
  with a truncated SVD to ``COMPONENTS`` dimensions and scaled to unit length,
  so that Euclidean distance orders pairs as cosine distance does.
  Embeddings are scaled to unit length (and reduced alike when longer).
- Clusters: HDBSCAN (no preset number of clusters; what fits none is noise,
  and so is an item without a term that counts; when it finds no cluster it
  is asked whether all are one) on at most ``SAMPLE`` of the items; every
  other item joins the cluster whose centroid is nearest when it is at least
  as close to it as the cluster's own sampled members mostly are (its
  ``JOIN_PERCENTILE``-th percentile of cosine similarity), else it is noise.
- Names: a cluster's distinctive terms, the words whose mean TF-IDF weight in
  the cluster most exceeds their mean weight in the other items.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from sklearn.cluster import HDBSCAN
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

# Characters of each of input, output and expected answer that are read.
FIELD_CHARACTERS = 2_000
COMPONENTS = 24
SAMPLE = 5_000
JOIN_PERCENTILE = 5
TERMS = 5
MAX_FEATURES = 50_000
MAX_SHARE = 0.9
# Words of two letters or more (digits may follow the first letter).
TOKEN_PATTERN = r"(?u)\b[^\W\d_]{2,}\w*\b"
NOISE = -1


@dataclass(frozen=True, slots=True)
class Grouping:
    """Each text's cluster (``NOISE`` for none), and each cluster's terms."""

    labels: NDArray[np.int64]
    terms: list[list[str]]

    @property
    def clusters(self) -> int:
        return len(self.terms)


def field_text(value: Any) -> str:
    """An input, output or expected answer as text (JSON for a structure)."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text[:FIELD_CHARACTERS]


def item_text(input_value: Any, output: Any, expected: Any) -> str:
    """The text of a failing item: its input, output and expected answer."""
    return "\n".join(field_text(value) for value in (input_value, output, expected))


def tfidf(texts: Sequence[str]) -> tuple[sparse.csr_matrix, NDArray[np.str_]]:
    """The TF-IDF matrix of the texts (rows of unit length) and its terms;
    no terms at all gives a matrix without columns."""
    vectorizer = TfidfVectorizer(
        token_pattern=TOKEN_PATTERN,
        stop_words="english",
        sublinear_tf=True,
        min_df=2 if len(texts) > 2 else 1,
        # A term of nearly every failing item (a fixed instruction, an
        # answer's prefix) tells none of them apart.
        max_df=MAX_SHARE if len(texts) >= 10 else 1.0,
        max_features=MAX_FEATURES,
        dtype=np.float32,
    )
    try:
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # no term in any text (all empty, numbers or stop words)
        return sparse.csr_matrix((len(texts), 0), dtype=np.float32), np.array([])
    return sparse.csr_matrix(matrix), vectorizer.get_feature_names_out()


def reduced(vectors: Any) -> NDArray[np.float64]:
    """Vectors (sparse or dense) in at most ``COMPONENTS`` dimensions, of unit
    length."""
    rows, columns = vectors.shape
    components = min(COMPONENTS, columns - 1, rows - 1)
    if components >= 2 and columns > COMPONENTS:
        svd = TruncatedSVD(components, algorithm="randomized", n_iter=4, random_state=0)
        dense = svd.fit_transform(vectors)
    else:
        dense = sparse.csr_matrix(vectors).toarray()
    return normalize(np.asarray(dense, dtype=np.float64))


def min_cluster_size(count: int) -> int:
    """The smallest cluster of ``count`` points: 3, up to 1% of them (50 at most)."""
    return max(3, min(50, count // 100))


def _hdbscan(points: NDArray[np.float64], smallest: int) -> NDArray[np.int64]:
    """HDBSCAN's clusters; when it finds none, whether all are one (it
    looks for two or more unless told otherwise)."""
    found = HDBSCAN(
        min_cluster_size=smallest, min_samples=min(5, smallest), copy=True
    ).fit_predict(points)
    if (found == NOISE).all():
        found = HDBSCAN(
            min_cluster_size=smallest,
            min_samples=min(5, smallest),
            allow_single_cluster=True,
            copy=True,
        ).fit_predict(points)
    return np.asarray(found, dtype=np.int64)


def labels_of(points: NDArray[np.float64]) -> NDArray[np.int64]:
    """Each point's cluster (``NOISE`` for none), numbered biggest first.
    A zero vector (an item without a term that counts) is noise."""
    labels = np.full(len(points), NOISE, dtype=np.int64)
    kept = np.flatnonzero(np.linalg.norm(points, axis=1) > 0)
    count = len(kept)
    smallest = min_cluster_size(min(count, SAMPLE))
    if count < smallest:
        return labels
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(kept, size=min(count, SAMPLE), replace=False))
    found = _hdbscan(points[sample], smallest)
    labels[sample] = found
    kinds = [label for label in np.unique(found) if label != NOISE]
    if kinds and len(sample) < count:
        centroids = normalize(
            np.vstack([points[sample[found == label]].mean(axis=0) for label in kinds])
        )
        thresholds = np.array(
            [
                np.percentile(
                    points[sample[found == label]] @ centroid, JOIN_PERCENTILE
                )
                for label, centroid in zip(kinds, centroids, strict=True)
            ]
        )
        rest = np.setdiff1d(kept, sample, assume_unique=True)
        similarity = points[rest] @ centroids.T
        nearest = similarity.argmax(axis=1)
        close = similarity[np.arange(len(rest)), nearest] >= thresholds[nearest]
        labels[rest[close]] = np.asarray(kinds)[nearest[close]]
    return _biggest_first(labels)


def _biggest_first(labels: NDArray[np.int64]) -> NDArray[np.int64]:
    kinds, counts = np.unique(labels[labels != NOISE], return_counts=True)
    # Ties by first appearance, so that the numbering is stable.
    first = [int(np.argmax(labels == kind)) for kind in kinds]
    order = sorted(range(len(kinds)), key=lambda i: (-counts[i], first[i]))
    renumbered = np.full_like(labels, NOISE)
    for number, position in enumerate(order):
        renumbered[labels == kinds[position]] = number
    return renumbered


def distinctive_terms(
    matrix: sparse.csr_matrix,
    terms: NDArray[np.str_],
    labels: NDArray[np.int64],
    clusters: int,
    limit: int = TERMS,
) -> list[list[str]]:
    """Each cluster's terms whose mean weight in it most exceeds their mean
    weight in all other items (only terms that do exceed it)."""
    if not clusters or not matrix.shape[1]:
        return [[] for _ in range(clusters)]
    rows = np.flatnonzero(labels != NOISE)
    member = sparse.csr_matrix(
        (np.ones(len(rows)), (labels[rows], rows)), shape=(clusters, len(labels))
    )
    sums = np.asarray((member @ matrix).todense())
    total = np.asarray(matrix.sum(axis=0)).ravel()
    sizes = np.asarray(member.sum(axis=1)).ravel()
    others = np.maximum(len(labels) - sizes, 1)
    inside = sums / sizes[:, None]
    outside = (total[None, :] - sums) / others[:, None]
    lift = inside - outside
    named = []
    for row in lift:
        best = np.argsort(-row, kind="stable")[:limit]
        named.append([str(terms[i]) for i in best if row[i] > 0])
    return named


def group_texts(
    texts: Sequence[str], vectors: NDArray[np.float64] | None = None
) -> Grouping:
    """The texts' clusters, by their TF-IDF vectors or by ``vectors`` given
    (embeddings, one row per text), each named by its distinctive terms.

    On one thread of the BLAS: the matrices are small, and on a machine
    busy with other work its threads wait on each other for ten times as
    long as one thread takes.
    """
    with threadpool_limits(limits=1):
        return _group(texts, vectors)


def _group(texts: Sequence[str], vectors: NDArray[np.float64] | None) -> Grouping:
    matrix, terms = tfidf(texts)
    if vectors is not None:
        points = reduced(np.asarray(vectors, dtype=np.float64))
    elif matrix.shape[1]:
        points = reduced(matrix)
    else:
        points = np.zeros((len(texts), 0))
    if not len(texts) or not points.shape[1]:
        return Grouping(labels=np.full(len(texts), NOISE, dtype=np.int64), terms=[])
    labels = labels_of(points)
    clusters = int(labels.max()) + 1 if len(labels) else 0
    return Grouping(
        labels=labels, terms=distinctive_terms(matrix, terms, labels, clusters)
    )

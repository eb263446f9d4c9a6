"""Estimators and intervals for pass rates, from maintained libraries.

The functions take counts (already aggregated in the database), never rows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from statistics import NormalDist

import numpy as np

CONFIDENCE = 0.95

# How a pass rate's interval was computed, as the API names it, and the label
# the pages show.
WILSON = "wilson"
CLUSTERED = "wilson_clustered_items"
INTERVAL_LABELS = {WILSON: "Wilson", CLUSTERED: "Wilson, clustered by item"}


def wilson_interval(
    passed: int, total: int, *, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Wilson score interval of ``passed / total``; None without any trial.

    Newcombe's form (1998), as ``scipy.stats.binomtest(...).proportion_ci(
    method="wilson")`` computes it, with the normal quantile of the standard
    library: importing scipy.stats would cost every process that summarises a
    run (each evalrun, when its run ends) most of a second.
    """
    if total <= 0:
        return None
    z = NormalDist().inv_cdf(0.5 + 0.5 * confidence)
    return _wilson(passed / total, total, z)


def _wilson(p: float, n: float, quantile: float) -> tuple[float, float]:
    """Wilson's interval of a proportion p observed over n (maybe effective)
    trials, with the given two-sided quantile."""
    denominator = 2 * (n + quantile**2)
    centre = (2 * n * p + quantile**2) / denominator
    half = quantile / denominator * math.sqrt(4 * n * p * (1 - p) + quantile**2)
    low = 0.0 if p <= 0 else max(centre - half, 0.0)
    high = 1.0 if p >= 1 else min(centre + half, 1.0)
    return (low, high)


def clustered_interval(
    passed: int,
    total: int,
    items: Iterable[tuple[int, int, int]],
    *,
    confidence: float = CONFIDENCE,
) -> tuple[float, float] | None:
    """Interval of ``passed / total`` when each item was tried several times.

    The epochs of one item are not independent trials (an item a model cannot
    answer fails every epoch), so the trials are clustered by item. ``items``
    gives (n judged results, c passed, how many items) groups, as
    ``mean_over_items`` takes them. The pass rate is the ratio estimator
    p = sum c / sum n (each item weighted by its judged results); its variance
    the cluster-robust one with the small-sample factor G / (G - 1) over G
    items, V = G / (G - 1) * sum (c - p n)^2 / (sum n)^2. The interval is
    Wilson's at the effective sample size p (1 - p) / V (at most the results,
    as if the epochs were independent) with Student's quantile on G - 1
    degrees of freedom: Korn and Graubard's (1998) way of carrying a design
    effect into a binomial interval, which keeps Wilson's behaviour near 0
    and 1 where a plain t-interval (p +- t sqrt V) covers badly. When every
    item has the same pass fraction V is 0 and nothing tells the epochs'
    correlation apart: the effective size is then G - 1, that of items
    always passing or always failing. None with fewer than two items: one
    item's epochs say nothing of how items vary.
    """
    groups = [(n, c, count) for n, c, count in items if n > 0 and count > 0]
    clusters = sum(count for _, _, count in groups)
    if total <= 0 or clusters < 2:
        return None
    p = passed / total
    spread = sum(count * (c - p * n) ** 2 for n, c, count in groups)
    variance = clusters / (clusters - 1) * spread / total**2
    size = min(p * (1 - p) / variance, total) if variance > 0 else clusters - 1
    return _wilson(p, size, t_quantile(0.5 + 0.5 * confidence, clusters - 1))


@functools.lru_cache(maxsize=512)  # one per run size: a handful
def t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of
    freedom (scipy's ``stdtrit``)."""
    if not (0.5 <= probability < 1 and df >= 1):
        raise ValueError(f"need 0.5 <= p < 1 and df >= 1, got {probability=}, {df=}")
    # Imported here: only runs of several epochs need it, and scipy.special
    # takes about half a second to import in every other process.
    from scipy.special import stdtrit

    return float(stdtrit(df, probability))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k draws (of n attempts, c passing) passes.

    The unbiased estimator of Chen et al. 2021, ``1 - C(n-c, k) / C(n, k)``,
    in the product form that stays exact for large n.
    """
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Chance that all of k draws (of n attempts, c passing) pass:
    ``C(c, k) / C(n, k)``, as a product of k ratios."""
    _check(n, c, k)
    if c < k:
        return 0.0
    return float(np.prod(np.arange(c - k + 1, c + 1) / np.arange(n - k + 1, n + 1)))


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got {n=}, {c=}, {k=}")


def k_values(epochs: int) -> list[int]:
    """The powers of two 1, 2, 4, ... up to ``epochs``."""
    values = []
    k = 1
    while k <= epochs:
        values.append(k)
        k *= 2
    return values


def mean_over_items(
    groups: Iterable[tuple[int, int, int]], k: int, estimator: str
) -> float | None:
    """Mean of an estimator over items, from (n, c, how many items) groups.

    Items with fewer than k results cannot estimate it and are left out;
    None when no item has k results.
    """
    estimate = pass_at_k if estimator == "pass_at_k" else pass_hat_k
    weighted = total = 0.0
    for n, c, items in groups:
        if n >= k:
            weighted += items * estimate(n, c, k)
            total += items
    return weighted / total if total else None


def percentile_positions(count: int, fraction: float) -> tuple[int, int, float]:
    """Where the ``fraction`` quantile of ``count`` sorted values lies.

    The two 0-based positions around it and the weight of the upper one:
    numpy's default ("linear") definition, so a database can fetch two rows.
    """
    if count <= 0:
        raise ValueError("no values")
    position = fraction * (count - 1)
    lower = int(np.floor(position))
    upper = min(lower + 1, count - 1)
    return lower, upper, position - lower

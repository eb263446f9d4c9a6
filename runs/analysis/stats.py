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
# Above these degrees of freedom Student's quantile comes from its expansion
# around the normal one (error below 1e-9), below from the exact distribution.
_T_SERIES_DF = 200


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
    """The ``probability`` quantile (above 0.5) of Student's t with ``df``
    degrees of freedom, as ``scipy.stats.t.ppf`` gives it, without importing
    scipy (most of a second for each process that summarises a run)."""
    if not (0.5 <= probability < 1 and df >= 1):
        raise ValueError(f"need 0.5 <= p < 1 and df >= 1, got {probability=}, {df=}")
    z = NormalDist().inv_cdf(probability)
    if df > _T_SERIES_DF:
        # Abramowitz and Stegun 26.7.5 (Cornish-Fisher expansion).
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
        return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4
    # Bisection on the exact distribution, between z and a bound above it.
    target = 2 * probability - 1
    low, high = z, z
    while _t_central(high, df) < target:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        if _t_central(middle, df) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _t_central(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with an integer ``df``: the finite series
    of Abramowitz and Stegun 26.7.3 and 26.7.4."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2:
        term = total = 1.0
        for j in range(1, (df - 1) // 2):
            term *= cos2 * (2 * j) / (2 * j + 1)
            total += term
        series = math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0
        return 2 / math.pi * (theta + series)
    term = total = 1.0
    for j in range(1, df // 2):
        term *= cos2 * (2 * j - 1) / (2 * j)
        total += term
    return math.sin(theta) * total


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

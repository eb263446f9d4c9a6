"""Estimators and intervals for pass rates, from maintained libraries.

The functions take counts (already aggregated in the database), never rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist

import numpy as np

CONFIDENCE = 0.95


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
    p = passed / total
    denominator = 2 * (total + z**2)
    centre = (2 * total * p + z**2) / denominator
    half = z / denominator * math.sqrt(4 * total * p * (1 - p) + z**2)
    low = 0.0 if passed == 0 else centre - half
    high = 1.0 if passed == total else centre + half
    return (low, high)


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

"""The comparison's tests, intervals and detectable effects.

- Pass/fail scorer, one verdict per item (always so with one epoch): McNemar's
  exact test (two-sided binomial test on the discordant pairs) and Newcombe's
  hybrid score interval for the difference of paired proportions (his method
  10: Wilson intervals of both rates combined with the pairs' correlation).
- Items whose epochs disagree, or numeric scorers (values other than 0 and 1):
  the per-item differences (of pass fractions, or of mean values) are compared
  with a paired bootstrap over items: percentile interval and a two-sided test
  of the recentred resamples, fixed seed.
- p-values are adjusted with Holm's method across every (candidate, scorer)
  of the comparison.
- Minimum detectable effect (80% power, two-sided alpha 0.05, this many
  pairs): McNemar, Connor's (1987) normal approximation with the observed
  discordant rate (at least the effect itself); bootstrap, the normal
  approximation from the standard deviation of the per-item differences.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from runs.analysis.stats import wilson_interval

ALPHA = 0.05
POWER = 0.80
CONFIDENCE = 0.95
# The floor of resamples; each resample is a multinomial draw over the distinct
# differences, so the cost grows with resamples x distinct values.
BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 20_211_014
# Draws per bootstrap chunk (resamples x distinct differences): bounded memory.
BOOTSTRAP_CHUNK_DRAWS = 4_000_000
# Parts of a bootstrap's resamples, each with its own random stream.
BOOTSTRAP_STREAMS = 4
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _bootstrap_pool() -> ThreadPoolExecutor:
    """Threads that draw a bootstrap's parts, one per core (at most the parts)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = min(BOOTSTRAP_STREAMS, os.cpu_count() or 1)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="bootstrap")
        return _pool


def mcnemar_exact(*, regressions: int, improvements: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test on the discordant pairs."""
    discordant = regressions + improvements
    if discordant == 0:
        return 1.0
    from scipy import stats  # on first use (see below, before _z_sum)

    return float(stats.binomtest(improvements, discordant, 0.5).pvalue)


def newcombe_paired_interval(
    *, both_passed: int, regressions: int, improvements: int, both_failed: int
) -> tuple[float, float]:
    """95% interval of candidate - baseline pass rate (Newcombe 1998, method 10)."""
    a, b, c, d = both_passed, regressions, improvements, both_failed
    n = a + b + c + d
    p_cand, p_base = (a + c) / n, (a + b) / n
    # n > 0: the caller compares no empty table.
    low_cand, high_cand = wilson_interval(a + c, n, confidence=CONFIDENCE)
    low_base, high_base = wilson_interval(a + b, n, confidence=CONFIDENCE)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(margins) if margins else 0.0
    below_cand, above_base = p_cand - low_cand, high_base - p_base
    above_cand, below_base = high_cand - p_cand, p_base - low_base
    lower = math.sqrt(
        max(below_cand**2 - 2 * phi * below_cand * above_base + above_base**2, 0)
    )
    upper = math.sqrt(
        max(above_cand**2 - 2 * phi * above_cand * below_base + below_base**2, 0)
    )
    theta = p_cand - p_base
    return max(theta - lower, -1.0), min(theta + upper, 1.0)


@dataclass(frozen=True, slots=True)
class Bootstrap:
    mean: float
    interval: tuple[float, float]
    p_value: float
    sd: float


def paired_bootstrap(
    values: np.ndarray,
    counts: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Bootstrap:
    """Bootstrap over items of the mean paired difference.

    Items are drawn with replacement; with the differences grouped by value, a
    resample is a multinomial draw of how often each value is taken (the same
    distribution as drawing items). The p-value is two-sided, from the
    resamples recentred on zero (Efron and Tibshirani 1993, 16.4).
    """
    n = int(counts.sum())
    mean = float(values @ counts) / n
    sd = math.sqrt(float(((values - mean) ** 2) @ counts) / max(n - 1, 1))
    # Resamples in BOOTSTRAP_STREAMS fixed parts, each from its own stream of
    # the seed: the same figures on any machine, however many threads draw
    # them (numpy draws without the GIL, so the parts run side by side).
    parts = np.array_split(np.arange(resamples), BOOTSTRAP_STREAMS)
    streams = np.random.SeedSequence(seed).spawn(BOOTSTRAP_STREAMS)
    chunk = max(1, BOOTSTRAP_CHUNK_DRAWS // max(len(values), 1))
    means = np.empty(resamples)

    def draw(part: np.ndarray, stream: np.random.SeedSequence) -> None:
        rng = np.random.default_rng(stream)
        for start in range(0, len(part), chunk):
            where = part[start : start + chunk]
            draws = rng.multinomial(n, counts / n, size=len(where))
            means[where] = draws @ values / n

    list(_bootstrap_pool().map(draw, parts, streams))
    low, high = np.quantile(means, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    # A tolerance: sums of the same values in another order differ in the last bit.
    extreme = np.abs(means - mean) >= abs(mean) - 1e-12
    p_value = 1.0 if mean == 0 else float((1 + extreme.sum()) / (resamples + 1))
    return Bootstrap(mean, (float(low), float(high)), min(p_value, 1.0), sd)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# scipy.stats and scipy.optimize are imported by the functions that use them,
# on first use: at the top of this module they cost every process (each
# evalrun, each web server) most of a second of start-up.


def _z_sum() -> float:
    from scipy import stats

    return float(stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER))


def mcnemar_mde(*, paired: int, discordant: int) -> float | None:
    """Smallest difference of pass rates McNemar's test would see (80% power).

    Connor (1987): n d^2 = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2, psi the
    discordant rate, taken as observed but at least d (an effect d needs at
    least that many discordant pairs). None when even d = 1 is out of reach.
    """
    if paired == 0:
        return None
    from scipy import optimize, stats

    z_alpha = float(stats.norm.ppf(1 - ALPHA / 2))
    z_beta = float(stats.norm.ppf(POWER))
    observed = discordant / paired

    def gap(d: float) -> float:
        psi = max(observed, d)
        return (
            paired * d * d
            - (z_alpha * math.sqrt(psi) + z_beta * math.sqrt(max(psi - d * d, 0))) ** 2
        )

    if gap(1.0) < 0:
        return None
    return float(optimize.brentq(gap, 1e-9, 1.0))


def bootstrap_mde(*, paired: int, sd: float) -> float | None:
    """(z_a + z_b) sd / sqrt(n): the normal approximation for a paired mean."""
    if paired < 2 or sd == 0:
        return None
    return _z_sum() * sd / math.sqrt(paired)

"""The comparison's tests, intervals and detectable effects.

- Pass/fail scorer, one verdict per item (always so with one epoch): McNemar's
  exact test (two-sided binomial test on the discordant pairs). Its interval
  is inverted from the same test, so the two never disagree: the
  Clopper-Pearson interval of the improvements' share among the discordant
  pairs (the exact binomial test's own inversion), times the Wilson interval
  of the discordant rate (the bound that widens the interval most). It
  excludes 0 exactly when the test's p-value is below the interval's alpha.
- Items whose epochs disagree, or numeric scorers (values other than 0 and 1):
  a paired sign-flip permutation test over items on the sum of the per-item
  differences (of pass fractions, or of mean values). Under "no difference"
  each item's difference is as likely negative as positive; the p-value is the
  share of sign vectors whose sum is at least as far from 0 as the observed
  one. Exact (every sign vector, counted by how many items of each value flip)
  while there are at most ``EXACT_SIGN_VECTORS`` of those counts; else, from
  ``NORMAL_EFFECTIVE_ITEMS`` effective items on, the normal approximation of
  that distribution (mean 0, variance the sum of the squared differences,
  continuity corrected; its accuracy is stated in ``signflip``); else
  ``RESAMPLES`` random sign vectors from a fixed seed, p = (b + 1) / (B + 1).
  Zero differences are kept: they add nothing to any sum, so the p-value is
  the same as without them. One item, or any number of identical differences,
  is never significant by construction (k equal differences: p = 2 / 2^k).
  The interval is the test inverted: every shift mu for which the differences
  minus mu are not rejected, from the same sign vectors (or the same normal
  approximation); None when that set is unbounded (too few items for any
  shift to be rejected at that level).
- p-values are adjusted with Holm's method across every (candidate, scorer)
  of the comparison; each row's interval and detectable effect are at the
  row's Holm level, alpha x p / p_Holm: the level at which the row's own test
  gives the Holm verdict, so its interval excludes 0 exactly when the verdict
  is better or worse.
- Minimum detectable effect (80% power at the row's level, this many pairs):
  McNemar, the exact test's power summed over the binomial count of
  discordant pairs (the observed discordant rate, at least the effect
  itself), the smallest effect with power >= 80%; sign-flip, the normal
  approximation with Student quantiles (n - 1 degrees of freedom) for the
  spread of the per-item differences, None when no sign vector could reach
  the level (2 / 2^n >= alpha).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runs.analysis.compare.draws import draw_in_parts, moments
from runs.analysis.compare.signflip import DRAWN, EXACT, RESAMPLES, SignFlip
from runs.analysis.stats import wilson_interval

ALPHA = 0.05
POWER = 0.80
CONFIDENCE = 0.95
# The floor of resamples; each resample is a multinomial draw over the distinct
# differences, so the cost grows with resamples x distinct values.
BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 20_211_014


# A pure function of two counts that a comparison, its interval and its
# detectable effect ask for again and again; scipy's test is the slow part.
@functools.lru_cache(maxsize=65_536)
def mcnemar_exact(*, regressions: int, improvements: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test on the discordant pairs."""
    discordant = regressions + improvements
    if discordant == 0:
        return 1.0
    from scipy import stats  # on first use (see below, before _z_sum)

    return float(stats.binomtest(improvements, discordant, 0.5).pvalue)


def mcnemar_interval(
    *,
    both_passed: int,
    regressions: int,
    improvements: int,
    both_failed: int,
    alpha: float = ALPHA,
) -> tuple[float, float]:
    """Interval of candidate - baseline pass rate inverted from McNemar's test.

    The difference is psi (2 q - 1), psi the discordant rate and q the
    improvements' share of the discordant pairs. q's interval is the exact
    test's inversion (Clopper-Pearson, alpha / 2 each side), so 2 q - 1 keeps
    0 exactly when the test does not reject at ``alpha``; each bound is then
    scaled by the end of psi's Wilson interval that widens it, which keeps its
    sign.
    """
    from scipy import stats

    b, c = regressions, improvements
    n = both_passed + b + c + both_failed
    k = b + c
    psi = wilson_interval(k, n, confidence=1 - alpha)
    assert psi is not None  # n > 0: the caller compares no empty table.
    low_q = float(stats.beta.ppf(alpha / 2, c, k - c + 1)) if c else 0.0
    high_q = float(stats.beta.ppf(1 - alpha / 2, c + 1, k - c)) if c < k else 1.0
    if k and _mcnemar_keeps_zero(b, c, alpha):
        # The quantiles' last bits must not undo what the test decided.
        low_q, high_q = min(low_q, 0.5), max(high_q, 0.5)
    low, high = 2 * low_q - 1, 2 * high_q - 1
    return (
        low * (psi[1] if low < 0 else psi[0]),
        high * (psi[0] if high < 0 else psi[1]),
    )


def _mcnemar_keeps_zero(regressions: int, improvements: int, alpha: float) -> bool:
    return mcnemar_exact(regressions=regressions, improvements=improvements) >= alpha


def newcombe_paired_interval(
    *,
    both_passed: int,
    regressions: int,
    improvements: int,
    both_failed: int,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Interval of candidate - baseline pass rate (Newcombe 1998, method 10).

    With Newcombe's corrected phi (AD - BC less N/2 when positive), as
    Fagerland, Lydersen and Laake (2014) recommend. Not the comparison's
    interval: it can exclude 0 where McNemar's exact test finds no difference.
    """
    a, b, c, d = both_passed, regressions, improvements, both_failed
    n = a + b + c + d
    p_cand, p_base = (a + c) / n, (a + b) / n
    # n > 0: the caller compares no empty table.
    cand = wilson_interval(a + c, n, confidence=confidence)
    base = wilson_interval(a + b, n, confidence=confidence)
    assert cand is not None and base is not None
    (low_cand, high_cand), (low_base, high_base) = cand, base
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross: float = a * d - b * c
    if cross > 0:
        cross = max(cross - n / 2, 0)
    phi = cross / math.sqrt(margins) if margins else 0.0
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
    observed = moments(values, counts)
    n, mean = observed.n, observed.mean
    means = np.empty(resamples)

    def fill(rng: np.random.Generator, where: np.ndarray) -> None:
        draws = rng.multinomial(n, counts / n, size=len(where))
        means[where] = draws @ values / n

    draw_in_parts(resamples, np.random.SeedSequence(seed), len(values), fill)
    low, high = np.quantile(means, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    # A tolerance: sums of the same values in another order differ in the last bit.
    extreme = np.abs(means - mean) >= abs(mean) - 1e-12
    p_value = 1.0 if mean == 0 else float((1 + extreme.sum()) / (resamples + 1))
    return Bootstrap(mean, (float(low), float(high)), min(p_value, 1.0), observed.sd)


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


def holm_level(*, p_value: float, p_adjusted: float, alpha: float = ALPHA) -> float:
    """The row's Holm level: alpha x p / p_Holm, at which its own p-value gives
    the Holm verdict (p < level exactly when p_Holm < alpha); between alpha / m
    and alpha."""
    if p_adjusted <= 0:
        return alpha
    return alpha * p_value / p_adjusted


def mcnemar_power(
    *, paired: int, discordant_rate: float, effect: float, alpha: float = ALPHA
) -> float:
    """Power of McNemar's exact test, summed over the discordant count.

    Pairs are discordant with probability ``discordant_rate`` (psi); a
    discordant pair is an improvement with probability (psi + effect) / 2 psi.
    For each count k the test rejects below the binomial's alpha / 2 quantile
    or above its mirror (the two-sided test at p = 1/2 doubles the tail).
    """
    from scipy import special

    psi = min(max(discordant_rate, effect), 1.0)
    if psi <= 0:
        return 0.0
    share = (psi + effect) / (2 * psi)
    first, last, weights = _discordant_counts(paired, psi)
    k = np.arange(first, last + 1)
    below = _largest_rejected(first, last, alpha)
    rejects = special.bdtr(below, k, share) + special.bdtrc(k - below - 1, k, share)
    # -1: the test cannot reject with so few discordant pairs.
    return float(weights @ np.where(below >= 0, rejects, 0.0))


@functools.lru_cache(maxsize=64)
def _discordant_counts(paired: int, psi: float) -> tuple[int, int, np.ndarray]:
    """The discordant counts that matter and their binomial probabilities
    (those left out weigh less than 1e-12 together)."""
    from scipy import stats

    # Not a frozen distribution: freezing one costs more than these three
    # calls, and a going run's comparison asks with a new count every second.
    binom = stats.binom
    first = max(int(binom.ppf(1e-13, paired, psi)) - 1, 1)
    last = min(int(binom.isf(1e-13, paired, psi)) + 1, paired)
    return first, last, binom.pmf(np.arange(first, last + 1), paired, psi)


@functools.lru_cache(maxsize=64)
def _largest_rejected(first: int, last: int, alpha: float) -> np.ndarray:
    """For k discordant pairs from first to last, the largest count of
    improvements the exact test rejects at ``alpha`` (-1: none): below the
    binomial's alpha / 2 quantile, as the two-sided test at p = 1/2 doubles
    the tail. The same for every effect tried, so computed once."""
    from scipy import stats

    counts = np.arange(first, last + 1)
    return np.asarray(stats.binom.ppf(alpha / 2, counts, 0.5) - 1, dtype=float)


def mcnemar_mde(*, paired: int, discordant: int, alpha: float = ALPHA) -> float | None:
    """Smallest difference of pass rates McNemar's exact test detects with 80%
    power at ``alpha``, the discordant rate as observed but at least the
    effect (an effect d needs at least that many discordant pairs). None when
    even d = 1 is out of reach."""
    if paired == 0:
        return None
    observed = discordant / paired

    def power(effect: float) -> float:
        return mcnemar_power(
            paired=paired, discordant_rate=observed, effect=effect, alpha=alpha
        )

    if power(1.0) < POWER:
        return None
    from scipy import optimize

    effect = float(optimize.brentq(lambda d: power(d) - POWER, 0.0, 1.0, xtol=1e-7))
    # The root is within 1e-7: step to the side of power >= POWER.
    while power(effect) < POWER:
        effect = min(effect + 1e-7, 1.0)
    return effect


def sign_flip_mde(*, test: SignFlip, alpha: float = ALPHA) -> float | None:
    """(t_a + t_b) sd / sqrt(n), Student quantiles with n - 1 degrees of
    freedom: the normal approximation of the sign-flip test's power, widened
    for small samples. None when the test could not reach ``alpha`` with any
    sample of this size (exact: 2 / 2^n; drawn: 1 / (B + 1); normal: any)."""
    n = test.n
    smallest = {
        EXACT: 2 / 2.0 ** min(n, 1023),
        DRAWN: 1 / (RESAMPLES + 1),
    }.get(test.method, 0.0)
    if n < 2 or test.sd == 0 or smallest >= alpha:
        return None
    from scipy import stats

    quantiles = stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(POWER, n - 1)
    return float(quantiles * test.sd / math.sqrt(n))


def bootstrap_mde(*, paired: int, sd: float) -> float | None:
    """(z_a + z_b) sd / sqrt(n): the normal approximation for a paired mean."""
    if paired < 2 or sd == 0:
        return None
    return _z_sum() * sd / math.sqrt(paired)

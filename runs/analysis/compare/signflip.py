"""The paired sign-flip permutation test over items, and its inverted interval.

The definitions are stated in ``significance``. The differences come grouped
by value: ``values`` (distinct) and ``counts`` (items with that value). A sign
vector flips some items of each value; what the sum depends on is how many of
each value keep their sign, so a sign vector is enumerated as one count per
value, or drawn as one binomial count per value (the popcount of uniform
random bits, one bit per item: exactly Binomial(c, 1/2)). The sum of the
differences minus any shift mu is ``sums - mu * signs`` (``sums`` the signed
sum of the values, ``signs`` the signed count of items). The same sign
vectors test every mu, so the interval is the test inverted without drawing
again.

With many items of comparable size the sum over sign vectors is normal (mean
0, variance the sum of the squared differences, Hoeffding 1952): from
``NORMAL_EFFECTIVE_ITEMS`` effective items on, (sum d^2)^2 / sum d^4 (the
count of items when they are all the same size, fewer when a few dominate),
the p-value is that normal distribution's two-sided tail, continuity
corrected by the smallest |d| (half the smallest step one sign flip makes).
Its error is largest when every |d| is the same (a binomial lattice) and the
correction misses it (a coarse lattice broken by one tiny difference): at
10,000 effective items, at most 0.0020 on p-values up to 0.1, 3.9% of p
between 1e-4 and 0.05, a rejection rate of 5.12% at a nominal 5% (the
binomial test as reference); 2,000 random sign vectors err by 0.0049 (one
standard error) at p = 0.05. See ``bench/sign_flip_normal.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from runs.analysis.compare.draws import draw_in_parts, moments

# Exact while the counts of kept signs per value, (c1 + 1)(c2 + 1)..., are at
# most this many: every sample of up to 17 items, and larger ones with few
# distinct differences.
EXACT_SIGN_VECTORS = 1 << 17
RESAMPLES = 2_000
# Effective items, (sum d^2)^2 / sum d^4, from which the sum over sign vectors
# is taken as normal (the error at this size is stated above).
NORMAL_EFFECTIVE_ITEMS = 10_000
SEED = 20_211_014
# Bisection steps of an interval bound: the bracket shrinks by 2^-60.
BISECTIONS = 60
# How the sign vectors are counted: every one (weighted by its probability),
# RESAMPLES random ones, or the normal distribution of their sums.
EXACT = "exact"
DRAWN = "monte_carlo"
NORMAL = "normal"
ALL_BITS = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@dataclass(frozen=True, slots=True, eq=False)
class SignFlip:
    """A sign-flip test's observed figures and its sign vectors."""

    n: int
    mean: float
    sd: float
    method: str  # EXACT, DRAWN or NORMAL
    p_value: float
    total: float  # the observed sum of the differences
    squares: float  # the sum of the squared deviations from the mean
    step: float  # the normal's continuity correction: the smallest |d|
    lowest: float
    highest: float
    sums: np.ndarray = field(repr=False)  # empty when NORMAL
    signs: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)  # exact: probabilities; else empty

    @property
    def exact(self) -> bool:
        return self.method == EXACT

    def p_at(self, mu: float) -> float:
        """Two-sided p-value of the differences minus ``mu``."""
        if self.method == NORMAL:
            return self._normal_p_at(mu)
        observed = abs(self.total - mu * self.n)
        # Sums of the same values in another order differ in the last bits.
        slack = 1e-9 * (abs(self.total) + abs(mu) * self.n + 1e-300)
        extreme = np.abs(self.sums - mu * self.signs) >= observed - slack
        if self.exact:
            return min(1.0, float(self.weights[extreme].sum()))
        return float((1 + np.count_nonzero(extreme)) / (len(self.sums) + 1))

    def _normal_p_at(self, mu: float) -> float:
        # The sum of (d - mu) over sign vectors: mean 0, variance the sum of
        # (d - mu)^2. Both grow with |mean - mu|, the ratio too: p falls
        # steadily away from the mean, so the inverted interval is one piece.
        shift = self.mean - mu
        variance = self.squares + self.n * shift * shift
        if variance <= 0:
            return 1.0
        observed = max(abs(self.total - mu * self.n) - self.step, 0.0)
        return min(1.0, math.erfc(observed / math.sqrt(2 * variance)))

    def interval(self, *, alpha: float) -> tuple[float, float] | None:
        """Every mu not rejected at ``alpha`` (the test inverted); None when
        unbounded: even a shift past every difference is not rejected."""
        span = self.highest - self.lowest + 1.0
        if self.p_at(self.highest + span) >= alpha:
            return None

        def bound(inside: float, outside: float) -> float:
            # p is 1 at the mean and falls away from it on either side.
            for _ in range(BISECTIONS):
                middle = (inside + outside) / 2
                if self.p_at(middle) >= alpha:
                    inside = middle
                else:
                    outside = middle
            return inside

        return (
            bound(self.mean, self.lowest - span),
            bound(self.mean, self.highest + span),
        )


def _sign_vector_count(counts: np.ndarray) -> int:
    total = 1
    for count in counts.tolist():
        total *= int(count) + 1
        if total > EXACT_SIGN_VECTORS:
            break
    return total


def _enumerated(
    values: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sums, signs, weights = np.zeros(1), np.zeros(1), np.ones(1)
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        kept = np.arange(count + 1)
        signed = 2.0 * kept - count
        chance = np.array([math.comb(count, k) for k in kept.tolist()]) / 2.0**count
        sums = (sums[:, None] + signed[None, :] * value).ravel()
        signs = (signs[:, None] + signed[None, :]).ravel()
        weights = (weights[:, None] * chance[None, :]).ravel()
    return sums, signs, weights


def effective_items(values: np.ndarray, counts: np.ndarray) -> float:
    """(sum d^2)^2 / sum d^4: the items' count when every |d| is the same,
    fewer when a few large differences dominate the sum; 0 with none."""
    largest = float(np.abs(values).max()) if len(values) else 0.0
    if largest == 0:
        return 0.0
    squared = (values / largest) ** 2
    return float((squared @ counts) ** 2 / ((squared * squared) @ counts))


def _words(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's items as the bits of 64-bit words: the value each word
    belongs to, and the mask of the word's bits in use."""
    per_value = (counts + 63) // 64
    owner = np.repeat(np.arange(len(counts)), per_value)
    bits = np.full(len(owner), 64, dtype=np.int64)
    bits[np.cumsum(per_value) - 1] = counts - 64 * (per_value - 1)
    partial = (np.uint64(1) << (bits % 64).astype(np.uint64)) - np.uint64(1)
    return owner, np.where(bits == 64, ALL_BITS, partial)


def _drawn(
    values: np.ndarray, counts: np.ndarray, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    # The seed and the differences together: the same figures for the same
    # differences on any machine, and other sign vectors for other
    # differences. One fixed set of vectors for every sample would hold each
    # test to that set's own level (5.95% at a nominal 5% with 2,000 vectors
    # over 50 items), not to alpha.
    digest = hashlib.blake2b(values.tobytes() + counts.tobytes(), digest_size=16)
    words = np.frombuffer(digest.digest(), dtype=np.uint32).tolist()
    owner, masks = _words(counts)
    word_values = values[owner]
    total, n = float(values @ counts), float(counts.sum())
    sums, signs = np.empty(resamples), np.empty(resamples)

    def fill(rng: np.random.Generator, where: np.ndarray) -> None:
        bits = rng.integers(
            0, ALL_BITS, (len(where), len(masks)), np.uint64, endpoint=True
        )
        # A set bit keeps its item's sign: the kept count of each value is
        # the popcount of its bits, Binomial(count, 1/2).
        kept = np.bitwise_count(bits & masks).astype(float)
        sums[where] = 2 * (kept @ word_values) - total
        signs[where] = 2 * kept.sum(axis=1) - n

    draw_in_parts(resamples, np.random.SeedSequence([seed, *words]), len(masks), fill)
    return sums, signs


def sign_flip_test(
    values: np.ndarray,
    counts: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> SignFlip:
    """The paired sign-flip permutation test of the differences' mean."""
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    kept = counts > 0
    values, counts = values[kept], counts[kept]
    observed = moments(values, counts)
    sd = observed.sd
    # A spread within rounding of the values' size is none at all.
    if sd <= 1e-12 * max(1.0, float(np.abs(values).max())):
        sd = 0.0
    nonzero = np.abs(values[values != 0])
    empty = np.empty(0)
    sums, signs, weights = empty, empty, empty
    if _sign_vector_count(counts) <= EXACT_SIGN_VECTORS:
        method = EXACT
        sums, signs, weights = _enumerated(values, counts)
    elif effective_items(values, counts) >= NORMAL_EFFECTIVE_ITEMS:
        method = NORMAL
    else:
        method = DRAWN
        sums, signs = _drawn(values, counts, resamples, seed)
    test = SignFlip(
        n=observed.n,
        mean=observed.mean,
        sd=sd,
        method=method,
        p_value=1.0,
        total=observed.total,
        squares=observed.squares,
        step=float(nonzero.min()) if len(nonzero) else 0.0,
        lowest=float(values.min()),
        highest=float(values.max()),
        sums=sums,
        signs=signs,
        weights=weights,
    )
    p_value = 1.0 if observed.total == 0 else test.p_at(0.0)
    return dataclasses.replace(test, p_value=p_value)

"""Accuracy of the sign-flip test's normal approximation, where it is used.

From ``NORMAL_EFFECTIVE_ITEMS`` effective items, (sum d^2)^2 / sum d^4, the
comparison and the leaderboard read the sign-flip p-value from the normal
distribution of the sums over sign vectors (mean 0, variance sum d^2,
continuity corrected by the smallest |d|). This measures, at that size:

1. The worst case, against exact references (scipy's binomial
   distribution): every |d| the same (a binomial lattice: the sign test), and
   the same lattice broken by one tiny difference, which takes the continuity
   correction away. Max |p_normal - p_exact| over p_exact <= 0.1, the largest
   relative error for p_exact in [1e-4, 0.05], and the exact rejection rate
   at a nominal 5% and 0.5% (the Holm level of 10 pairs), over n from N to
   N + 40 (the lattice's parity moves the error).
2. Typical differences (3-decimal judge scores; heavier-tailed Laplace values):
   p_normal against a Monte Carlo reference of ``--reference`` sign vectors
   (binomial counts per distinct |d|, an independent drawing), at shifts
   giving p from about 0.5 to 0.001.
3. The simulated false-positive rate of the test at nominal 5% and 1% for
   samples at that size (random signs on fixed |d|), ``--samples`` each; and
   the rate of its rule (|sum| - min |d| beyond z sqrt(sum d^2), checked
   against the test on one sample) over 1,000,000 draws of the sums.

    .venv/bin/python bench/sign_flip_normal.py [--samples 20000]
        [--reference 200000] [--parts 1,2,3]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SEED = 20_240_611
TINY = 1e-6


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()


def grouped(differences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, counts = np.unique(differences, return_counts=True)
    return values, counts


def tail(points: np.ndarray, weights: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """x -> the weight of the points at or beyond x (1e-12 of slack)."""
    order = np.argsort(points)
    ordered = points[order]
    beyond = np.cumsum(weights[order][::-1])[::-1]
    beyond = np.append(beyond, 0.0)

    def at_least(x: np.ndarray) -> np.ndarray:
        return beyond[np.searchsorted(ordered, x - 1e-12, side="left")]

    return at_least


def lattice_errors(n: int, *, broken: bool) -> tuple[float, float, float, float]:
    """For n items of |d| = 1 (and, when ``broken``, one more of |d| = 1e-6),
    every count of positive signs within 7 standard deviations (beyond, both
    p-values are below 1e-11): the normal p against the exact p (scipy's
    binomial); and the exact rejection rates at 5% and 0.5% of the normal p."""
    from runs.analysis.compare import sign_flip_test

    positive = np.arange(n + 1)
    pmf = stats.binom.pmf(positive, n, 0.5)
    sums = 2.0 * positive - n
    if broken:
        # The tiny item's sign is +1 or -1 with probability 1/2 each.
        at_least = tail(np.abs(np.r_[sums + TINY, sums - TINY]), np.r_[pmf, pmf] / 2)
        observed = np.abs(sums + TINY)
    else:
        at_least = tail(np.abs(sums), pmf)
        observed = np.abs(sums)
    exact = np.minimum(1.0, at_least(observed))
    window = np.abs(sums) <= 7 * math.sqrt(n)
    approx = np.zeros(n + 1)  # beyond the window: below 1e-11
    for k in positive[window].tolist():
        values, counts = np.array([-1.0, 1.0]), np.array([n - k, k])
        if broken:
            values, counts = np.array([-1.0, TINY, 1.0]), np.array([n - k, 1, k])
        keep = counts > 0
        approx[k] = sign_flip_test(values[keep], counts[keep]).p_value
    edge = positive[window][0]
    assert approx[edge] < 1e-11 and exact[edge] < 1e-11, (approx[edge], exact[edge])
    up_to = exact <= 0.1
    band = (exact >= 1e-4) & (exact <= 0.05)
    worst = float(np.abs(approx - exact)[up_to].max())
    relative = float((np.abs(approx - exact)[band] / exact[band]).max())
    size5 = float(pmf[approx < 0.05].sum())
    size05 = float(pmf[approx < 0.005].sum())
    return worst, relative, size5, size05


def worst_case(size: int) -> None:
    print(f"1. worst case at {size:,} effective items, n from {size} to {size + 40}")
    print(
        f"   {'lattice':34} {'max |err| p<=0.1':>17} {'max rel 1e-4..0.05':>19} "
        f"{'size at 5%':>11} {'size at 0.5%':>13}"
    )
    for label, broken in (
        ("every |d| the same", False),
        ("the same, broken by one tiny |d|", True),
    ):
        rows = [lattice_errors(n, broken=broken) for n in range(size, size + 41)]
        worst = max(r[0] for r in rows)
        relative = max(r[1] for r in rows)
        size5 = max(r[2] for r in rows)
        size05 = max(r[3] for r in rows)
        print(
            f"   {label:34} {worst:17.2e} {relative:19.2%} {size5:11.3%} {size05:13.4%}"
        )
    mc = math.sqrt(0.05 * 0.95 / 2000)
    print(f"   (2,000 random sign vectors: one standard error at p = 0.05 is {mc:.4f})")


def scores(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.beta(2, 2, n).round(3) - rng.beta(2, 2, n).round(3)


def heavy(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.laplace(0.0, 1.0, n).round(3)


def reference_p(differences: np.ndarray, resamples: int, seed: int) -> float:
    """Monte Carlo p of the sign-flip test: binomial counts of kept signs per
    distinct |d|, (b + 1) / (B + 1)."""
    sizes, counts = np.unique(np.abs(differences), return_counts=True)
    observed = abs(float(differences.sum()))
    rng = np.random.default_rng(seed)
    extreme = 0
    chunk = max(1, 20_000_000 // len(sizes))
    for start in range(0, resamples, chunk):
        kept = rng.binomial(
            counts, 0.5, size=(min(chunk, resamples - start), len(sizes))
        )
        sums = (2.0 * kept - counts) @ sizes
        extreme += int(np.count_nonzero(np.abs(sums) >= observed * (1 - 1e-9)))
    return (extreme + 1) / (resamples + 1)


def typical(size: int, resamples: int) -> None:
    from runs.analysis.compare import effective_items, sign_flip_test

    print(
        f"\n2. typical differences near {size:,} effective items, against "
        f"{resamples:,} random sign vectors"
    )
    print(
        f"   {'differences':24} {'n':>7} {'n_eff':>7} {'z':>5} {'p normal':>10} "
        f"{'p reference':>12} {'± 2 se':>8}"
    )
    rng = np.random.default_rng(SEED)
    draws: dict[str, tuple[Callable[[np.random.Generator, int], np.ndarray], int]] = {
        "3-decimal scores": (scores, int(size * 2.9)),
        "Laplace, 3 decimals": (heavy, int(size * 6.6)),
    }
    for label, (draw, n) in draws.items():
        base = draw(rng, n)
        centred = base - base.mean()
        spread = math.sqrt(float(centred @ centred))
        for z in (0.7, 1.96, 2.6, 3.3):
            differences = (centred + z * spread / n).round(6)
            test = sign_flip_test(*grouped(differences))
            reference = reference_p(differences, resamples, SEED + int(z * 10))
            error = 2 * math.sqrt(reference * (1 - reference) / resamples)
            print(
                f"   {label:24} {n:7,} "
                f"{effective_items(*grouped(differences)):7.0f} {z:5.2f} "
                f"{test.p_value:10.5f} {reference:12.5f} {error:8.5f}  ({test.method})"
            )


def false_positives(size: int, samples: int) -> None:
    from runs.analysis.compare import sign_flip_test

    print(
        f"\n3. false-positive rate at {size:,} effective items or more, "
        f"{samples:,} samples (random signs on fixed |d|)"
    )
    rng = np.random.default_rng(SEED + 1)
    cases = {
        "3-decimal scores": np.abs(scores(rng, int(size * 2.9))),
        "every |d| the same": np.ones(size),
        "the same and one tiny": np.r_[np.ones(size), TINY],
    }
    error = math.sqrt(0.05 * 0.95 / samples)
    error1 = math.sqrt(0.01 * 0.99 / samples)
    for label, sizes in cases.items():
        rejected5 = rejected1 = 0
        methods = set()
        for _ in range(samples):
            signs = rng.integers(0, 2, len(sizes)) * 2 - 1
            test = sign_flip_test(*grouped(signs * sizes))
            methods.add(test.method)
            rejected5 += test.p_value < 0.05
            rejected1 += test.p_value < 0.01
        print(
            f"   {label:24} at 5%: {rejected5 / samples:6.2%}  at 1%: "
            f"{rejected1 / samples:6.2%}  ({', '.join(sorted(methods))}; "
            f"standard errors {error:.2%} and {error1:.2%})"
        )
        rates = rule_rates(sizes, test, rng)
        print(
            f"   {'':24} its rule over {DRAWS:,} draws of the sums: at 5%: "
            f"{rates[0]:7.3%}  at 1%: {rates[1]:7.3%}"
        )


DRAWS = 1_000_000


def rule_rates(sizes: np.ndarray, test: Any, rng: np.random.Generator) -> list[float]:
    """How often the normal test's rule rejects over DRAWS sums of the sizes
    with random signs (binomial counts per distinct size)."""
    distinct, counts = np.unique(sizes, return_counts=True)
    sigma = math.sqrt(float((distinct**2) @ counts))
    step = float(distinct[distinct > 0].min())
    # The rule is the test's: the same p on the test's own last sample.
    rule_p = math.erfc(max(abs(test.total) - step, 0.0) / (sigma * math.sqrt(2)))
    assert abs(rule_p - test.p_value) < 1e-9, (rule_p, test.p_value)
    rejected = [0, 0]
    chunk = max(1, 20_000_000 // len(distinct))
    for start in range(0, DRAWS, chunk):
        kept = rng.binomial(
            counts, 0.5, size=(min(chunk, DRAWS - start), len(distinct))
        )
        sums = np.abs((2.0 * kept - counts) @ distinct) - step
        for i, alpha in enumerate((0.05, 0.01)):
            critical = float(stats.norm.isf(alpha / 2)) * sigma
            rejected[i] += int(np.count_nonzero(sums > critical))
    return [r / DRAWS for r in rejected]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--reference", type=int, default=200_000)
    parser.add_argument("--parts", default="1,2,3")
    args = parser.parse_args()
    parts = {int(part) for part in args.parts.split(",")}
    setup_django()
    from runs.analysis.compare import NORMAL_EFFECTIVE_ITEMS

    if 1 in parts:
        worst_case(NORMAL_EFFECTIVE_ITEMS)
    if 2 in parts:
        typical(NORMAL_EFFECTIVE_ITEMS, args.reference)
    if 3 in parts:
        false_positives(NORMAL_EFFECTIVE_ITEMS, args.samples)


if __name__ == "__main__":
    main()

"""Coverage of the agreement statistics' 95% bootstrap intervals, and their
time on a large queue.

Draws label sets whose population agreement is known: each item has a true
category drawn from the marginal p; each rater gives it with probability a,
else a category drawn from p. Both raters' marginals are then p, and chance
agreement sum(p^2), so the population Cohen's kappa, Fleiss' kappa and
Krippendorff's alpha (nominal) are all a^2. Labels go missing at random with
probability ``--missing`` (which leaves the population value as it is).
Counts how often each percentile interval (``agreement.rater_agreement``,
``--replicates`` resamples of the items) holds a^2.

Then times ``rater_agreement`` on a 10,000-item, 3-rater queue (every
statistic, 1,000 replicates, the disputed items) and on 2 raters.

    .venv/bin/python bench/agreement_coverage.py [--samples 400]
        [--items 50,200] [--accuracy 0.8] [--missing 0.1] [--replicates 1000]

Goal: coverage of 93% or more at 200 items; the 10,000-item report under
0.3 s. A coverage's Monte Carlo standard error is about 1.1% with 400 samples.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOAL = 0.93
TIME_GOAL = 0.3
SEED = 20_261_126
MARGINAL = (0.5, 0.3, 0.2)

from runs.analysis import agreement  # noqa: E402  (needs ROOT on the path)


def labels(
    rng: np.random.Generator, raters: int, items: int, accuracy: float, missing: float
) -> list[list[int | None]]:
    k = len(MARGINAL)
    truth = rng.choice(k, size=items, p=MARGINAL)
    keep = rng.random((raters, items)) < accuracy
    noise = rng.choice(k, size=(raters, items), p=MARGINAL)
    given = np.where(keep, truth, noise)
    gone = rng.random((raters, items)) < missing
    return [
        [None if g else int(v) for v, g in zip(row, lost, strict=True)]
        for row, lost in zip(given, gone, strict=True)
    ]


def coverage(
    rng: np.random.Generator,
    *,
    raters: int,
    items: int,
    accuracy: float,
    missing: float,
    samples: int,
    replicates: int,
) -> dict[str, tuple[float, float, int]]:
    """Per statistic: (coverage, mean interval width, samples with an interval)."""
    truth = accuracy**2
    hits: dict[str, list[bool]] = {}
    widths: dict[str, list[float]] = {}
    for sample in range(samples):
        report = agreement.rater_agreement(
            labels(rng, raters, items, accuracy, missing),
            replicates=replicates,
            seed=sample,
        )
        for name, estimate in report.estimates.items():
            if name == "percent_agreement" or estimate.interval is None:
                continue
            low, high = estimate.interval
            hits.setdefault(name, []).append(low <= truth <= high)
            widths.setdefault(name, []).append(high - low)
    return {
        name: (sum(found) / len(found), statistics.fmean(widths[name]), len(found))
        for name, found in hits.items()
    }


def timing(raters: int, items: int, replicates: int, repeats: int = 5) -> float:
    """The median time of a whole report over a queue of ``items``."""
    rng = np.random.default_rng(SEED)
    matrix = labels(rng, raters, items, 0.8, 0.0)
    agreement.rater_agreement(matrix, replicates=10)  # warm up numpy
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        agreement.rater_agreement(matrix, replicates=replicates)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--items", default="50,200")
    parser.add_argument("--accuracy", type=float, default=0.8)
    parser.add_argument("--missing", type=float, default=0.1)
    parser.add_argument("--replicates", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    truth = args.accuracy**2
    print(
        f"population kappa = alpha = {truth:.3f} (accuracy {args.accuracy}, "
        f"marginal {MARGINAL}, {args.missing:.0%} of labels missing); "
        f"{args.samples} samples, {args.replicates} replicates each"
    )
    print(f"{'raters':>6} {'items':>6}  {'statistic':<28} {'coverage':>8} {'width':>7}")
    failed = False
    for items in (int(x) for x in args.items.split(",")):
        for raters in (2, 3):
            found = coverage(
                rng,
                raters=raters,
                items=items,
                accuracy=args.accuracy,
                missing=args.missing,
                samples=args.samples,
                replicates=args.replicates,
            )
            for name, (share, width, n) in found.items():
                print(
                    f"{raters:>6} {items:>6}  {name:<28} {share:>8.1%} {width:>7.3f}"
                    + ("" if n == args.samples else f"  ({n} with an interval)")
                )
                failed |= items >= 200 and share < GOAL
    print()
    for raters in (2, 3):
        seconds = timing(raters, 10_000, 1000)
        print(
            f"rater_agreement, 10,000 items x {raters} raters, 1,000 replicates: "
            f"{seconds * 1000:.0f} ms (median of 5)"
        )
        failed |= raters == 3 and seconds > TIME_GOAL
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

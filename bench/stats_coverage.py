"""Coverage of the pass rate's 95% interval when items are tried several times.

Draws runs of G items x E epochs whose epochs are correlated within an item:
each item's pass chance comes from Beta(m s, (1 - m) s) with s = (1 - rho) /
rho, so that the intra-item correlation of its verdicts is rho and the mean
pass rate m. Counts how often each interval holds m:

- Wilson over every result, as if the epochs were independent trials (before);
- the interval clustered by item the summary uses with several epochs
  (``stats.clustered_interval``).

    .venv/bin/python bench/stats_coverage.py [--samples 2000] [--items 20,50,200]
        [--epochs 5,10] [--rho 0.5] [--means 0.5,0.7,0.9]

Goal: at least 93% with 5 and 10 epochs at rho 0.5. A coverage's Monte Carlo
standard error is about 0.5% with 2,000 samples.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOAL = 0.93
SEED = 20_240_519

from runs.analysis import stats  # noqa: E402  (needs ROOT on the path)


def coverage(
    rng: np.random.Generator, items: int, epochs: int, rho: float, mean: float, n: int
) -> tuple[float, float]:
    """(independent-trial Wilson, clustered) coverage over n simulated runs."""
    spread = (1 - rho) / rho
    chances = rng.beta(mean * spread, (1 - mean) * spread, size=(n, items))
    passes = rng.binomial(epochs, chances)
    total = items * epochs
    before = after = 0
    for row in passes:
        passed = int(row.sum())
        groups = [(epochs, int(c), k) for c, k in Counter(row.tolist()).items()]
        for interval, hits in (
            (stats.wilson_interval(passed, total), "before"),
            (stats.clustered_interval(passed, total, groups), "after"),
        ):
            held = interval is not None and interval[0] <= mean <= interval[1]
            if hits == "before":
                before += held
            else:
                after += held
    return before / n, after / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--items", default="20,50,200")
    parser.add_argument("--epochs", default="5,10")
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--means", default="0.5,0.7,0.9")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    print(f"rho {args.rho}, {args.samples} samples per cell; goal >= {GOAL:.0%}")
    print("| mean | epochs | items | Wilson, independent (before) | clustered |")
    print("|---|---|---|---|---|")
    for mean in (float(m) for m in args.means.split(",")):
        for epochs in (int(e) for e in args.epochs.split(",")):
            for items in (int(g) for g in args.items.split(",")):
                before, after = coverage(
                    rng, items, epochs, args.rho, mean, args.samples
                )
                flag = "" if after >= GOAL else " (below goal)"
                print(
                    f"| {mean} | {epochs} | {items} | {before:.1%} | "
                    f"{after:.1%}{flag} |"
                )


if __name__ == "__main__":
    main()

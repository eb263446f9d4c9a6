"""A percentile bootstrap over items, for statistics that are functions of
the column sums of per-item sufficient statistics (agreement between raters,
a judge against people).

A resample of the items only changes how often each item counts, so every
replicate is a weighted sum of the rows: one matrix product per block of
replicates, instead of a recomputation from labels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

CONFIDENCE = 0.95
BOOTSTRAP = 1000
# Replicates are drawn in blocks of this many, to bound memory on big queues.
BLOCK = 256
# Up to this many kinds of item a resample is one multinomial draw over them.
MULTINOMIAL_KINDS = 512

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Undefined(ValueError):
    """The statistic is not defined for these labels (the reason says why)."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A statistic over the items, with its bootstrap interval when asked for.

    ``value`` is None when the statistic is undefined (``undefined`` says
    why). ``interval`` is None without a bootstrap or when too few replicates
    defined the statistic; ``undefined_replicates`` counts those that did not
    (a resample of one category only), which the interval leaves out.
    """

    statistic: str
    value: float | None
    items: int
    undefined: str = ""
    interval: tuple[float, float] | None = None
    confidence: float = CONFIDENCE
    replicates: int = 0
    undefined_replicates: int = 0


@dataclass(frozen=True, slots=True)
class Statistic:
    """A statistic to bootstrap: each item's sufficient statistics (a row per
    item) and the function of their column sums that gives it."""

    name: str
    parts: FloatArray
    compute: Callable[[FloatArray], float]
    # The same over many rows of sums (NaN where undefined); faster.
    batch: Callable[[FloatArray], FloatArray] | None = None


def resample_counts(
    frequencies: IntArray, size: int, rng: np.random.Generator
) -> FloatArray:
    """``size`` bootstrap resamples of the items, as how often each kind of
    item is drawn: items with the same sufficient statistics are
    interchangeable, so a resample of n items is a multinomial draw over the
    kinds with their frequencies (exactly, not an approximation)."""
    n = int(frequencies.sum())
    kinds = len(frequencies)
    if kinds <= MULTINOMIAL_KINDS:
        return rng.multinomial(n, frequencies / n, size=size).astype(np.float64)
    # Many kinds (interval labels): draw items, then count them by kind.
    kind_of = np.repeat(np.arange(kinds), frequencies)
    draws = kind_of[rng.integers(0, n, size=(size, n))]
    draws += (np.arange(size) * kinds)[:, None]
    counts = np.bincount(draws.ravel(), minlength=size * kinds)
    return counts.reshape(size, kinds).astype(np.float64)


def bootstrap_many(
    statistics: Sequence[Statistic],
    *,
    replicates: int = BOOTSTRAP,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> dict[str, Estimate]:
    """Each statistic and its percentile bootstrap interval, over one set of
    resamples of the items (every ``parts`` has a row per item, in one order).

    Resamples where a statistic is undefined (one category only) are counted
    and left out; with fewer than half of the replicates defined there is no
    interval. An estimate's ``items`` are those that add to it.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: {confidence} is not between 0 and 1")
    if replicates < 0:
        raise ValueError(f"replicates: {replicates} is negative")
    n = statistics[0].parts.shape[0] if statistics else 0
    values: dict[str, list[float]] = {}
    out: dict[str, Estimate] = {}
    for stat in statistics:
        items = int(np.any(stat.parts != 0, axis=1).sum())
        try:
            value = stat.compute(stat.parts.sum(axis=0))
        except Undefined as exc:
            out[stat.name] = Estimate(
                stat.name, None, items, str(exc), confidence=confidence
            )
            continue
        out[stat.name] = Estimate(stat.name, value, items, confidence=confidence)
        values[stat.name] = []
    live = [stat for stat in statistics if stat.name in values]
    if replicates == 0 or n == 0 or not live:
        return out
    # The kinds of item (rows of every statistic's parts side by side).
    rows = np.ascontiguousarray(np.hstack([stat.parts for stat in live]))
    # Each row as one opaque value: sorting bytes is faster than by columns.
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))
    _, first, frequencies = np.unique(
        keys.ravel(), return_index=True, return_counts=True
    )
    rng = np.random.default_rng(seed)
    undefined = dict.fromkeys(values, 0)
    for start in range(0, replicates, BLOCK):
        counts = resample_counts(frequencies, min(BLOCK, replicates - start), rng)
        for stat in live:
            block = counts @ stat.parts[first]
            if stat.batch is not None:
                batch = stat.batch(block)
                defined = np.isfinite(batch)
                values[stat.name].extend(batch[defined].tolist())
                undefined[stat.name] += int((~defined).sum())
                continue
            for sums in block:
                try:
                    values[stat.name].append(stat.compute(sums))
                except Undefined:
                    undefined[stat.name] += 1
    tail = (1 - confidence) / 2 * 100
    for name, drawn in values.items():
        interval = None
        if len(drawn) * 2 >= replicates:
            low, high = np.percentile(drawn, [tail, 100 - tail])
            interval = (float(low), float(high))
        out[name] = replace(
            out[name],
            interval=interval,
            replicates=replicates,
            undefined_replicates=undefined[name],
        )
    return out


def bootstrap(
    statistic: str,
    parts: FloatArray,
    compute: Callable[[FloatArray], float],
    *,
    batch: Callable[[FloatArray], FloatArray] | None = None,
    replicates: int = BOOTSTRAP,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> Estimate:
    """One statistic and its percentile bootstrap interval, resampling only
    the items that add to it (``bootstrap_many``)."""
    parts = parts[np.any(parts != 0, axis=1)]
    found = bootstrap_many(
        [Statistic(statistic, parts, compute, batch)],
        replicates=replicates,
        seed=seed,
        confidence=confidence,
    )
    return found[statistic]

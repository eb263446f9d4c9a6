"""Agreement between raters: percent agreement, Cohen's and Fleiss' kappa,
Krippendorff's alpha, with bootstrap intervals over items.

Pure functions over labels (no models). Labels come as a raters x items
matrix (a sequence of rows, one per rater) holding a label or None where a
rater gave none. Every statistic is computed from per-item sufficient
statistics weighted by how often each item is drawn, so the bootstrap over
items is a matrix product rather than a loop of recomputations.

A statistic that the labels cannot define (one category only, no item with
two labels) is ``Undefined`` with the reason, never 0/0 or a crash.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from runs.analysis.item_bootstrap import (
    BOOTSTRAP,
    CONFIDENCE,
    Estimate,
    Statistic,
    Undefined,
    bootstrap,
    bootstrap_many,
)

Label = Hashable
Matrix = Sequence[Sequence[Label | None]]
Level = Literal["nominal", "ordinal", "interval"]
Weights = Literal["linear", "quadratic"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")

__all__ = [
    "BOOTSTRAP",
    "CONFIDENCE",
    "Estimate",
    "Statistic",
    "Undefined",
    "bootstrap",
    "bootstrap_many",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Coded:
    """Labels as integer codes (-1 for none) over the ordered categories."""

    codes: IntArray  # raters x items
    categories: tuple[Label, ...]

    @property
    def raters(self) -> int:
        return int(self.codes.shape[0])

    @property
    def items(self) -> int:
        return int(self.codes.shape[1])

    def counts(self) -> IntArray:
        """Items x categories: how many raters gave each category to each item."""
        k = len(self.categories)
        out = np.zeros((self.items, k), dtype=np.int64)
        for row in self.codes:
            given = row >= 0
            np.add.at(out, (np.nonzero(given)[0], row[given]), 1)
        return out


@dataclass(frozen=True, slots=True)
class Disagreement:
    """An item whose raters gave different labels: its column and the labels."""

    item: int
    labels: tuple[Label | None, ...]
    counts: dict[Label, int] = field(default_factory=dict)


def code_labels(matrix: Matrix, categories: Sequence[Label] | None = None) -> Coded:
    """The matrix as integer codes; the categories in order (given, or sorted).

    ValueError naming the rater and item of a label outside ``categories``,
    or of rows of different lengths.
    """
    rows = [list(row) for row in matrix]
    if not rows:
        raise ValueError("labels: no raters")
    width = len(rows[0])
    for r, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(
                f"labels[{r}]: {len(row)} items, but labels[0] has {width}"
            )
    if categories is None:
        present = {label for row in rows for label in row if label is not None}
        categories = _ordered(present)
    index = {label: i for i, label in enumerate(categories)}
    codes = np.full((len(rows), width), -1, dtype=np.int64)
    for r, row in enumerate(rows):
        for i, label in enumerate(row):
            if label is None:
                continue
            if label not in index:
                raise ValueError(
                    f"labels[{r}][{i}]: {label!r} is not one of the categories"
                )
            codes[r, i] = index[label]
    return Coded(codes, tuple(categories))


def _ordered(labels: set[Label]) -> Sequence[Label]:
    """Labels sorted by value when they compare (numbers, strings), else by repr."""
    numbers = [x for x in labels if isinstance(x, int | float)]
    if len(numbers) == len(labels):
        return sorted(numbers)
    texts = [x for x in labels if isinstance(x, str)]
    if len(texts) == len(labels):
        return sorted(texts)
    return sorted(labels, key=repr)


# -- distances between categories -------------------------------------------------


def distances(
    level: Level, categories: Sequence[Label], totals: FloatArray | None = None
) -> FloatArray:
    """Squared distances between categories for Krippendorff's alpha.

    Nominal: 0 or 1. Interval: the squared difference of the values. Ordinal:
    Krippendorff's rank distance, from the marginal totals of the categories.
    """
    k = len(categories)
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level == "interval":
        try:
            values = np.array([float(c) for c in categories])  # type: ignore[arg-type]  # checked by float()
        except (TypeError, ValueError):
            raise ValueError(
                "labels: the interval level needs numeric labels"
            ) from None
        return (values[:, None] - values[None, :]) ** 2
    if level == "ordinal":
        if totals is None:
            raise ValueError("the ordinal distance needs the category totals")
        cumulative = np.cumsum(totals)
        # sum of n_g for g between c and k, minus half of n_c and n_k.
        low = np.minimum.outer(np.arange(k), np.arange(k))
        high = np.maximum.outer(np.arange(k), np.arange(k))
        between = cumulative[high] - cumulative[low] + totals[low]
        return (between - (totals[:, None] + totals[None, :]) / 2) ** 2
    raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")


def kappa_weights(k: int, weights: Weights | None) -> FloatArray:
    """Disagreement weights between k ordered categories (0 on the diagonal)."""
    i = np.arange(k)
    gap = np.abs(i[:, None] - i[None, :]).astype(np.float64)
    if weights is None:
        return (gap > 0).astype(np.float64)
    if weights == "linear":
        return gap
    if weights == "quadratic":
        return gap**2
    raise ValueError(f"weights: {weights!r} is not linear or quadratic")


# -- per-item sufficient statistics and the statistics from them ----------------
#
# Each ``*_parts`` function returns an items x m array; each ``*_from`` takes
# its column sums (weighted by how often each item is drawn: all ones for the
# labels as they are) and returns the statistic, or raises Undefined.


def agreement_parts(coded: Coded) -> FloatArray:
    """Per item: [agreeing pairs of raters, pairs of raters] (items with 2+)."""
    counts = coded.counts().astype(np.float64)
    labelled = counts.sum(axis=1)
    pairs = labelled * (labelled - 1) / 2
    agreeing = (counts * (counts - 1) / 2).sum(axis=1)
    return np.column_stack([agreeing, pairs])


def agreement_from(sums: FloatArray) -> float:
    agreeing, pairs = float(sums[0]), float(sums[1])
    if pairs <= 0:
        raise Undefined("no item has two labels")
    return agreeing / pairs


def cohen_parts(coded: Coded) -> FloatArray:
    """Per item: the one-hot k x k cell of the two raters' labels (both given)."""
    if coded.raters != 2:
        raise ValueError(f"labels: Cohen's kappa needs 2 raters, not {coded.raters}")
    k = len(coded.categories)
    a, b = coded.codes
    both = (a >= 0) & (b >= 0)
    cells = np.zeros((coded.items, k * k))
    rows = np.nonzero(both)[0]
    cells[rows, a[both] * k + b[both]] = 1.0
    return cells


def cohen_from(sums: FloatArray, weights: FloatArray) -> float:
    k = weights.shape[0]
    table = sums.reshape(k, k)
    n = table.sum()
    if n <= 0:
        raise Undefined("no item has labels from both raters")
    observed = table / n
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    chance = float((weights * expected).sum())
    if chance <= 0:
        raise Undefined(
            "both raters gave a single category: chance agreement is total, "
            "kappa is undefined"
        )
    return 1.0 - float((weights * observed).sum()) / chance


def fleiss_parts(counts: IntArray) -> FloatArray:
    """Per item: [its category counts..., sum of n_ij (n_ij - 1)] (equal raters)."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2:
        raise ValueError("counts: need an items x categories table")
    per_item = counts.sum(axis=1)
    if len(per_item) and (per_item != per_item[0]).any():
        bad = int(np.nonzero(per_item != per_item[0])[0][0])
        raise ValueError(
            f"counts[{bad}]: {per_item[bad]:g} ratings, but counts[0] has "
            f"{per_item[0]:g} (Fleiss' kappa needs as many raters per item)"
        )
    if len(per_item) and per_item[0] < 2:
        raise ValueError("counts: Fleiss' kappa needs at least 2 raters per item")
    pairs = (counts * (counts - 1)).sum(axis=1)
    return np.column_stack([counts, pairs])


def fleiss_from(sums: FloatArray, raters: int, items: float) -> float:
    totals, pairs = sums[:-1], float(sums[-1])
    if items <= 0:
        raise Undefined("no items")
    share = totals / (items * raters)
    chance = float((share**2).sum())
    if chance >= 1.0 - 1e-12:
        raise Undefined(
            "every rating is the same category: chance agreement is total, "
            "kappa is undefined"
        )
    observed = pairs / (items * raters * (raters - 1))
    return (observed - chance) / (1.0 - chance)


def alpha_parts(coded: Coded) -> FloatArray:
    """Per item: its k x k coincidences (pairs of labels, over m_u - 1)."""
    counts = coded.counts().astype(np.float64)
    labelled = counts.sum(axis=1)
    pairable = labelled >= 2
    share = np.zeros_like(labelled)
    share[pairable] = 1.0 / (labelled[pairable] - 1)
    k = counts.shape[1]
    outer = counts[:, :, None] * counts[:, None, :]
    outer[:, np.arange(k), np.arange(k)] -= counts
    return (outer * share[:, None, None]).reshape(len(counts), k * k)


def alpha_from(sums: FloatArray, level: Level, categories: Sequence[Label]) -> float:
    k = len(categories)
    coincidences = sums.reshape(k, k)
    totals = coincidences.sum(axis=1)
    n = float(totals.sum())
    if n <= 1:
        raise Undefined("no item has two labels")
    delta = distances(level, categories, totals)
    observed = float((coincidences * delta).sum())
    expected = float((np.outer(totals, totals) * delta).sum()) / (n - 1)
    if expected <= 0:
        raise Undefined(
            "every label is the same value: there is no variation to agree on, "
            "alpha is undefined"
        )
    return 1.0 - observed / expected


# -- the same, over many resamples at once ------------------------------------------
#
# Each ``*_batch`` takes a replicates x m array of column sums and returns the
# statistic per replicate, NaN where it is undefined (``*_from`` raises).


def _ratio(
    top: FloatArray, bottom: FloatArray, valid: npt.NDArray[np.bool_]
) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(valid, top / np.where(valid, bottom, 1.0), np.nan)


def agreement_batch(sums: FloatArray) -> FloatArray:
    return _ratio(sums[:, 0], sums[:, 1], sums[:, 1] > 0)


def cohen_batch(sums: FloatArray, weights: FloatArray) -> FloatArray:
    k = weights.shape[0]
    tables = sums.reshape(-1, k, k)
    n = tables.sum(axis=(1, 2))
    observed = tables / np.where(n > 0, n, 1.0)[:, None, None]
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
    chance = (weights * expected).sum(axis=(1, 2))
    disagree = (weights * observed).sum(axis=(1, 2))
    return 1.0 - _ratio(disagree, chance, (n > 0) & (chance > 0))


def fleiss_batch(sums: FloatArray, raters: int) -> FloatArray:
    totals, pairs = sums[:, :-1], sums[:, -1]
    ratings = totals.sum(axis=1)
    valid = ratings > 0
    share = totals / np.where(valid, ratings, 1.0)[:, None]
    chance = (share**2).sum(axis=1)
    valid &= chance < 1.0 - 1e-12
    observed = pairs / np.where(valid, ratings * (raters - 1), 1.0)
    return _ratio(observed - chance, 1.0 - chance, valid)


def alpha_batch(
    sums: FloatArray, level: Level, categories: Sequence[Label]
) -> FloatArray:
    k = len(categories)
    coincidences = sums.reshape(-1, k, k)
    totals = coincidences.sum(axis=2)
    n = totals.sum(axis=1)
    if level == "ordinal":
        cumulative = np.cumsum(totals, axis=1)
        low = np.minimum.outer(np.arange(k), np.arange(k))
        high = np.maximum.outer(np.arange(k), np.arange(k))
        between = cumulative[:, high] - cumulative[:, low] + totals[:, low]
        delta = (between - (totals[:, :, None] + totals[:, None, :]) / 2) ** 2
    else:
        delta = distances(level, categories)[None, :, :]
    observed = (coincidences * delta).sum(axis=(1, 2))
    pairs = (totals[:, :, None] * totals[:, None, :] * delta).sum(axis=(1, 2))
    expected = pairs / np.where(n > 1, n - 1, 1.0)
    return 1.0 - _ratio(observed, expected, (n > 1) & (expected > 0))


# -- the statistics, on labels as they are ------------------------------------------


def percent_agreement(matrix: Matrix) -> float:
    """Share of agreeing pairs of raters over the items with 2+ labels (for
    two raters: the share of items they gave the same label)."""
    return agreement_from(agreement_parts(code_labels(matrix)).sum(axis=0))


def cohen_kappa(
    first: Sequence[Label | None],
    second: Sequence[Label | None],
    *,
    weights: Weights | None = None,
    categories: Sequence[Label] | None = None,
) -> float:
    """Cohen's kappa of two raters over the items both labelled; weighted
    (linear or quadratic in the categories' ranks) for an ordinal scale."""
    coded = code_labels([first, second], categories)
    w = kappa_weights(len(coded.categories), weights)
    return cohen_from(cohen_parts(coded).sum(axis=0), w)


def fleiss_kappa(counts: Sequence[Sequence[int]] | IntArray) -> float:
    """Fleiss' kappa of an items x categories table of counts (equal raters)."""
    table = np.asarray(counts, dtype=np.int64)
    parts = fleiss_parts(table)
    raters = int(table[0].sum()) if len(table) else 0
    return fleiss_from(parts.sum(axis=0), raters, float(len(table)))


def krippendorff_alpha(
    matrix: Matrix,
    *,
    level: Level = "nominal",
    categories: Sequence[Label] | None = None,
) -> float:
    """Krippendorff's alpha of a raters x items matrix with missing labels
    (None), at the nominal, ordinal or interval level."""
    if level not in LEVELS:
        raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")
    coded = code_labels(matrix, categories)
    return alpha_from(alpha_parts(coded).sum(axis=0), level, coded.categories)


def disagreements(
    matrix: Matrix, categories: Sequence[Label] | None = None
) -> list[Disagreement]:
    """The items whose given labels are not all the same, in item order."""
    return coded_disagreements(code_labels(matrix, categories))


def coded_disagreements(coded: Coded) -> list[Disagreement]:
    counts = coded.counts()
    disputed = np.nonzero((counts > 0).sum(axis=1) > 1)[0]
    # Index 0 is "no label": codes are shifted by one.
    names = np.empty(len(coded.categories) + 1, dtype=object)
    names[0] = None
    names[1:] = coded.categories
    labels = names[coded.codes[:, disputed] + 1].T.tolist()
    cats = coded.categories
    rows = counts[disputed].tolist()
    return [
        Disagreement(
            item, tuple(given), {c: n for c, n in zip(cats, row, strict=True) if n}
        )
        for item, given, row in zip(disputed.tolist(), labels, rows, strict=True)
    ]


@dataclass(frozen=True, slots=True)
class AgreementReport:
    """Every statistic that fits the labels, and the items in dispute."""

    raters: int
    items: int
    level: Level
    categories: tuple[Label, ...]
    estimates: dict[str, Estimate]
    disagreements: list[Disagreement]


def rater_agreement(
    matrix: Matrix,
    *,
    level: Level = "nominal",
    categories: Sequence[Label] | None = None,
    replicates: int = BOOTSTRAP,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> AgreementReport:
    """Percent agreement, Krippendorff's alpha at ``level``, Fleiss' kappa
    (over the items every rater labelled) and, for two raters, Cohen's kappa
    (weighted linearly and quadratically too unless the level is nominal),
    each with its bootstrap interval; and the items where raters disagree."""
    if level not in LEVELS:
        raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")
    coded = code_labels(matrix, categories)
    cats = coded.categories
    # The items with two labels or more: the only ones any statistic uses,
    # resampled together so that the intervals come from one set of draws.
    counts = coded.counts()
    pairable = counts.sum(axis=1) >= 2
    statistics = [
        Statistic(
            "percent_agreement",
            agreement_parts(coded)[pairable],
            agreement_from,
            agreement_batch,
        ),
        Statistic(
            f"krippendorff_alpha_{level}",
            alpha_parts(coded)[pairable],
            functools.partial(alpha_from, level=level, categories=cats),
            functools.partial(alpha_batch, level=level, categories=cats),
        ),
    ]
    if coded.raters >= 2:
        raters = coded.raters
        shown = counts[pairable]
        complete = shown.sum(axis=1) == raters
        fleiss = np.zeros((len(shown), len(cats) + 1))
        if complete.any():
            fleiss[complete] = fleiss_parts(shown[complete])
        statistics.append(
            Statistic(
                "fleiss_kappa",
                fleiss,
                lambda sums: fleiss_from(sums, raters, float(sums[:-1].sum() / raters)),
                functools.partial(fleiss_batch, raters=raters),
            )
        )
    if coded.raters == 2:
        cells = cohen_parts(coded)[pairable]
        schemes: list[Weights | None] = [None]
        if level != "nominal":
            schemes += ["linear", "quadratic"]
        for scheme in schemes:
            name = "cohen_kappa" + (f"_{scheme}" if scheme else "")
            w = kappa_weights(len(cats), scheme)
            statistics.append(
                Statistic(
                    name,
                    cells,
                    functools.partial(cohen_from, weights=w),
                    functools.partial(cohen_batch, weights=w),
                )
            )
    estimates = bootstrap_many(
        statistics, replicates=replicates, seed=seed, confidence=confidence
    )
    return AgreementReport(
        coded.raters,
        coded.items,
        level,
        cats,
        estimates,
        coded_disagreements(coded),
    )

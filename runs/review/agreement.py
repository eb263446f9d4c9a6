"""A queue's agreement between its raters, per criterion, and its disputed items.

Reads the queue's label matrix and hands it to ``runs.analysis.agreement``:
nominal agreement for pass/fail, labels and preferences, ordinal and interval
Krippendorff's alpha (and weighted Cohen's kappa) for the 1 to 5 scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runs.analysis.agreement import (
    BOOTSTRAP,
    Estimate,
    Level,
    rater_agreement,
)
from runs.models import ReviewAdjudication, ReviewItem, ReviewQueue, RubricKind
from runs.review.selectors import LabelMatrix, queue_label_matrix

# The disputed items listed (the count says how many there are in all).
DISPUTED_LIMIT = 200
MAX_DISPUTED_LIMIT = 100_000

# The statistics shown, in order; those a queue cannot have are left out.
ORDER = (
    "percent_agreement",
    "cohen_kappa",
    "cohen_kappa_linear",
    "cohen_kappa_quadratic",
    "fleiss_kappa",
    "krippendorff_alpha_nominal",
    "krippendorff_alpha_ordinal",
    "krippendorff_alpha_interval",
)


@dataclass(frozen=True, slots=True)
class Disputed:
    """An item whose raters disagree: their labels by rater, and its settling."""

    review_item: int
    position: int
    labels: dict[str, Any]
    settled: Any = None
    settled_by: str = ""


@dataclass(frozen=True, slots=True)
class CriterionAgreement:
    criterion: str | None  # None: the overall label
    raters: list[str]
    items: int
    levels: list[str]
    estimates: list[Estimate]
    disputed: list[Disputed] = field(default_factory=list)
    undefined: str = ""  # why nothing can be measured yet
    disputed_total: int = 0  # ``disputed`` holds the first of them


def rubric_levels(rubric: dict[str, Any]) -> list[Level]:
    """The levels of measurement the rubric's labels have."""
    if rubric["kind"] == RubricKind.SCALE:
        return ["ordinal", "interval"]
    return ["nominal"]


def _categories(matrix: LabelMatrix, rubric: dict[str, Any]) -> list[Any] | None:
    # Several labels from a list: each set of labels is one category.
    if rubric["kind"] == RubricKind.LABELS and rubric.get("multiple"):
        return None
    return matrix.categories


def _shown(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def criterion_agreement(
    queue: ReviewQueue,
    criterion: str | None = None,
    *,
    replicates: int = BOOTSTRAP,
    disputed_limit: int = DISPUTED_LIMIT,
) -> CriterionAgreement:
    """The agreement of the queue's raters on one criterion (or the label),
    with the first ``disputed_limit`` disputed items (in the queue's order)."""
    matrix = queue_label_matrix(queue=queue, criterion=criterion)
    levels = rubric_levels(queue.rubric)
    if not matrix.raters:
        return CriterionAgreement(
            criterion, [], 0, list(levels), [], [], "no labels yet"
        )
    by_rater = [list(column) for column in zip(*matrix.values, strict=True)]
    categories = _categories(matrix, queue.rubric)
    found: dict[str, Estimate] = {}
    disagreements = []
    for level in levels:
        report = rater_agreement(
            by_rater, level=level, categories=categories, replicates=replicates
        )
        found.update(report.estimates)
        disagreements = report.disagreements
    estimates = [found[name] for name in ORDER if name in found]
    total = len(disagreements)
    disagreements = disagreements[:disputed_limit]
    positions = [matrix.items[d.item] for d in disagreements]
    ids = _item_ids(queue, positions)
    settled = _settled(queue, criterion)
    disputed = [
        Disputed(
            review_item=ids[position],
            position=position,
            labels={
                rater: _shown(value)
                for rater, value in zip(matrix.raters, d.labels, strict=True)
                if value is not None
            },
            settled=settled.get(ids[position], (None, ""))[0],
            settled_by=settled.get(ids[position], (None, ""))[1],
        )
        for d, position in zip(disagreements, positions, strict=True)
    ]
    return CriterionAgreement(
        criterion,
        matrix.raters,
        len(matrix.items),
        list(levels),
        estimates,
        disputed,
        disputed_total=total,
    )


def _item_ids(queue: ReviewQueue, positions: list[int]) -> dict[int, int]:
    """The review items' ids by position."""
    if not positions:
        return {}
    rows = ReviewItem.objects.filter(
        queue=queue, position__gte=positions[0], position__lte=positions[-1]
    ).values_list("position", "pk")
    wanted = set(positions)
    return {position: pk for position, pk in rows if position in wanted}


def _settled(queue: ReviewQueue, criterion: str | None) -> dict[int, tuple[Any, str]]:
    """The latest adjudicated value of each item (of the criterion), and by whom."""
    rows = (
        ReviewAdjudication.objects.filter(review_item__queue=queue)
        .order_by("review_item_id", "changed_at", "pk")
        .values_list("review_item_id", "value", "criteria", "user__username")
    )
    out: dict[int, tuple[Any, str]] = {}
    for item_id, value, criteria, username in rows:
        picked = value if criterion is None else criteria.get(criterion)
        out[item_id] = (picked, username or "")
    return out


def queue_agreement(
    *,
    queue: ReviewQueue,
    replicates: int = BOOTSTRAP,
    disputed_limit: int = DISPUTED_LIMIT,
) -> list[CriterionAgreement]:
    """The agreement on the queue's label, then on each of its criteria."""
    names: list[str | None] = [None, *queue.rubric.get("criteria", [])]
    return [
        criterion_agreement(
            queue, name, replicates=replicates, disputed_limit=disputed_limit
        )
        for name in names
    ]

"""Reads of human review: queues, a reviewer's blind page, progress, label matrices."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from runs.access import Action, require
from runs.errors import NotFound
from runs.models import HUMAN_SCORER_PREFIX, ReviewItem, ReviewLabel, ReviewQueue, Score
from runs.review.services import require_reviewer
from runs.web.selectors import row_get, visible_rows

AnyUser = User | AnonymousUser


def queue_list(
    *, user: AnyUser, project_id: int | None = None
) -> QuerySet[ReviewQueue]:
    """The queues of the projects the user sees (or of one of them), newest first."""
    return visible_rows(ReviewQueue, user=user, project_id=project_id).select_related(
        "project", "run", "other_run"
    )


def queue_get(
    *, user: AnyUser, queue_id: int, action: Action = Action.VIEW
) -> ReviewQueue:
    """A queue the user may see (and do ``action`` with in its project)."""
    queue = row_get(queue_list(user=user), pk=queue_id, noun="review queue")
    if action is not Action.VIEW:
        require(user, queue.project, action)
    return queue


def label_get(*, user: AnyUser, queue: ReviewQueue, label_id: int) -> ReviewLabel:
    """The caller's own label ``label_id`` of the queue; NotFound for another's."""
    require_reviewer(user, queue)
    try:
        return ReviewLabel.objects.select_related(
            "review_item__item", "review_item__result", "review_item__other_result"
        ).get(pk=label_id, queue=queue, reviewer_id=user.pk)
    except ReviewLabel.DoesNotExist:
        raise NotFound(f"no label {label_id} of yours in this queue") from None


@dataclass(frozen=True, slots=True)
class Progress:
    items: int
    complete: int  # items with all their raters' labels
    labels: int  # submitted labels, all reviewers
    mine: int  # the caller's submitted labels

    @property
    def percent(self) -> float:
        return 100.0 * self.complete / self.items if self.items else 0.0


def queue_progress(*, queue: ReviewQueue, user: AnyUser | None = None) -> Progress:
    """How far the queue is, read from counts the indexes serve: an item is
    complete when it has all its raters and none of them still holds it (a
    reviewer holds one item at a time, so those are few)."""
    labels = ReviewLabel.objects.filter(queue=queue)
    full = ReviewItem.objects.filter(queue=queue, taken__gte=queue.raters)
    held = labels.filter(
        submitted_at__isnull=True, review_item__taken__gte=queue.raters
    )
    submitted = labels.filter(submitted_at__isnull=False)
    return Progress(
        items=ReviewItem.objects.filter(queue=queue).count(),
        complete=full.count() - held.values("review_item").distinct().count(),
        labels=submitted.count(),
        mine=submitted.filter(reviewer_id=user.pk).count() if user else 0,
    )


def as_text(value: Any) -> str:
    """An output or an input as text to show (escaped by the template)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class Reveal:
    """What a blind reviewer sees only once they have labelled the item."""

    runs: list[str]
    models: list[str]
    judges: list[Any]
    others: list[Any]


@dataclass(frozen=True, slots=True)
class ReviewPage:
    queue: ReviewQueue
    label: ReviewLabel
    input: str
    expected: str | None
    outputs: list[tuple[str, str]]
    position: int
    previous_id: int | None
    next_id: int | None
    progress: Progress
    reveal: Reveal | None = None
    keys: list[tuple[str, str, str]] = field(default_factory=list)


def _reveal(queue: ReviewQueue, label: ReviewLabel) -> Reveal:
    item = label.review_item
    results = [r for r in (item.result, item.other_result) if r is not None]
    judges = list(
        Score.objects.filter(result__in=results)
        .exclude(scorer__startswith=HUMAN_SCORER_PREFIX)
        .values("scorer", "passed", "value", "reason")
    )
    others = list(
        ReviewLabel.objects.filter(review_item=item, submitted_at__isnull=False)
        .exclude(pk=label.pk)
        .values("reviewer__username", "value", "criteria", "note")
    )
    runs = [queue.run, *([queue.other_run] if queue.other_run else [])]
    return Reveal(
        runs=[f"{run} (#{run.pk}, {run.target_name})" for run in runs],
        models=sorted({r.model for r in results if r.model}),
        judges=judges,
        others=others,
    )


def rubric_keys(rubric: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each key of the page, what it reads, and the value it gives (JSON)."""
    kind = rubric["kind"]
    pairs: list[tuple[str, Any]]
    if kind == "pass_fail":
        pairs = [("p", "pass"), ("f", "fail")]
    elif kind == "scale":
        pairs = [(str(n), n) for n in range(1, 6)]
    elif kind == "preference":
        pairs = [("a", "left"), ("b", "right"), ("t", "tie")]
    else:
        pairs = [(str(n), label) for n, label in enumerate(rubric["labels"], start=1)]
    return [(key, str(value), json.dumps(value)) for key, value in pairs]


def item_texts(
    queue: ReviewQueue, label: ReviewLabel
) -> tuple[str, str | None, list[tuple[str, str]]]:
    """What a reviewer reads: the input, the expected answer (when the rubric
    shows it) and the output, or the two outputs by side."""
    item = label.review_item
    outputs = [("Output", as_text(item.result.output))]
    if item.other_result is not None:
        pair = [as_text(item.result.output), as_text(item.other_result.output)]
        left, right = reversed(pair) if item.swapped else pair
        outputs = [("Left", left), ("Right", right)]
    shown = queue.rubric.get("show_expected", True) and item.item.expected is not None
    expected = as_text(item.item.expected) if shown else None
    return as_text(item.item.input), expected, outputs


def _neighbours(label: ReviewLabel) -> tuple[int, int | None, int | None]:
    """The label's place among its reviewer's labels of the queue (1-based),
    and the ids of the one before and the one after."""
    mine = ReviewLabel.objects.filter(
        queue_id=label.queue_id, reviewer_id=label.reviewer_id
    )
    before = mine.filter(
        Q(assigned_at__lt=label.assigned_at)
        | Q(assigned_at=label.assigned_at, pk__lt=label.pk)
    )
    after = mine.filter(
        Q(assigned_at__gt=label.assigned_at)
        | Q(assigned_at=label.assigned_at, pk__gt=label.pk)
    )
    previous = before.order_by("-assigned_at", "-pk").values_list("pk", flat=True)
    following = after.order_by("assigned_at", "pk").values_list("pk", flat=True)
    return before.count() + 1, previous.first(), following.first()


def review_page(*, queue: ReviewQueue, label: ReviewLabel) -> ReviewPage:
    """A reviewer's page of one item: blind (no run, target, model, judge or
    other reviewer) until they have labelled it, unless the queue is not."""
    text, expected, outputs = item_texts(queue, label)
    position, previous_id, next_id = _neighbours(label)
    return ReviewPage(
        queue=queue,
        label=label,
        input=text,
        expected=expected,
        outputs=outputs,
        position=position,
        previous_id=previous_id,
        next_id=next_id,
        progress=queue_progress(queue=queue, user=label.reviewer),
        reveal=_reveal(queue, label) if label.submitted or not queue.blind else None,
        keys=rubric_keys(queue.rubric),
    )


def shown_value(queue: ReviewQueue, label: ReviewLabel) -> Any:
    """A label's value as its reviewer gave it: a preference by side."""
    value = label.value
    if queue.is_comparison and value in ("a", "b"):
        swapped = label.review_item.swapped
        return "left" if (value == "a") != swapped else "right"
    return value


@dataclass(frozen=True, slots=True)
class LabelMatrix:
    """Items by raters: each rater's submitted value of each item, None where
    missing; what agreement statistics read."""

    kind: str
    categories: list[Any]
    items: list[int]  # the review items' positions
    raters: list[str]  # usernames
    values: list[list[Any | None]]


def queue_label_matrix(
    *, queue: ReviewQueue, criterion: str | None = None
) -> LabelMatrix:
    """The queue's labels as an items by raters matrix (of one criterion)."""
    if criterion is not None and criterion not in queue.rubric.get("criteria", []):
        raise NotFound(f"no criterion {criterion!r} in this queue")
    # The column as JSON text, decoded once per distinct text: a queue's
    # labels take few values, and decoding each row's dominated the read.
    column = "value" if criterion is None else "criteria"
    rows = (
        ReviewLabel.objects.filter(queue=queue, submitted_at__isnull=False)
        .order_by()
        .annotate(raw=Cast(column, output_field=TextField()))
        .values_list("review_item__position", "reviewer__username", "raw")
    )
    decoded: dict[str | None, Any] = {None: None}
    cells: dict[tuple[int, str], Any] = {}
    raters: set[str] = set()
    for position, rater, raw in rows.iterator(chunk_size=5_000):
        if raw not in decoded:
            decoded[raw] = json.loads(raw)
        picked = decoded[raw]
        if criterion is not None:
            picked = picked.get(criterion) if isinstance(picked, dict) else None
        if isinstance(picked, list):
            picked = tuple(picked)
        cells[(position, rater)] = picked
        raters.add(rater)
    positions = sorted({position for position, _ in cells})
    names = sorted(raters)
    kind = queue.rubric["kind"]
    fixed: dict[str, list[Any]] = {
        "pass_fail": ["pass", "fail"],
        "scale": [1, 2, 3, 4, 5],
        "preference": ["a", "b", "tie"],
    }
    categories = fixed.get(kind, list(queue.rubric.get("labels", [])))
    return LabelMatrix(
        kind=kind,
        categories=categories,
        items=positions,
        raters=names,
        values=[[cells.get((p, r)) for r in names] for p in positions],
    )

"""An adjudicator settles a disputed item: their label becomes its consensus.

Editors of the queue's project adjudicate. Each setting is kept (who, when,
what) in ``ReviewAdjudication``; the latest is the item's ``human:<queue>``
score until it is withdrawn, when the raters' consensus comes back.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from runs.access import Action, require
from runs.errors import InvalidInput, NotFound
from runs.models import ReviewAdjudication, ReviewItem, ReviewQueue
from runs.review import scores
from runs.review.rubric import MAX_NOTE, criteria_clean, value_clean


def review_item_get(*, queue: ReviewQueue, review_item_id: int) -> ReviewItem:
    try:
        return ReviewItem.objects.get(queue=queue, pk=review_item_id)
    except ReviewItem.DoesNotExist:
        raise NotFound(f"no item {review_item_id} in this queue") from None


def item_adjudicate(
    *,
    user: User | AnonymousUser,
    queue: ReviewQueue,
    review_item: ReviewItem,
    value: Any,
    criteria: Any = None,
    note: str = "",
) -> ReviewAdjudication:
    """Settle the item with ``value`` (and every criterion the rubric has)."""
    require(user, queue.project, Action.EDIT)
    rubric = queue.rubric
    if value is None:
        raise InvalidInput("an adjudication needs a value", field="value")
    cleaned_value = value_clean(rubric, value, field="value")
    cleaned = criteria_clean(rubric, criteria, field="criteria")
    missing = [name for name in rubric.get("criteria", []) if name not in cleaned]
    if missing:
        raise InvalidInput(f"no value for {', '.join(missing)}", field="criteria")
    if not isinstance(note, str) or len(note) > MAX_NOTE:
        raise InvalidInput(
            f"must be text of at most {MAX_NOTE} characters", field="note"
        )
    with transaction.atomic():
        row = ReviewAdjudication.objects.create(
            review_item=review_item,
            user_id=user.pk,
            changed_at=timezone.now(),
            value=cleaned_value,
            criteria=cleaned,
            note=note,
        )
        scores.item_scores_write(queue=queue, review_item=review_item)
    return row


def item_adjudication_withdraw(
    *, user: User | AnonymousUser, queue: ReviewQueue, review_item: ReviewItem
) -> None:
    """Take the item's adjudications back: its raters' consensus returns."""
    require(user, queue.project, Action.EDIT)
    with transaction.atomic():
        ReviewAdjudication.objects.filter(review_item=review_item).delete()
        scores.item_scores_write(queue=queue, review_item=review_item)

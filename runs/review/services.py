"""Writes of human review: queues, the next item for a reviewer, labels.

A reviewer is a member of the queue's project (any role) who is one of its
named reviewers, or any member when the queue is an open pool. The next item
is claimed with a conditional UPDATE of the item's ``taken`` count (never
past the queue's raters, whatever runs at once) and a label row unique per
(item, reviewer): a reviewer never gets an item twice; another, per reviewer
among unlabelled ones, keeps one item at a time in a reviewer's hands. On
PostgreSQL the candidate is picked with ``FOR UPDATE SKIP LOCKED``, so that
reviewers asking at once take different items instead of queueing on one.
"""

from __future__ import annotations

import random
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, Max, OuterRef
from django.utils import timezone

from runs.access import Action, can, require
from runs.errors import Conflict, Forbidden, InvalidInput, NotFound
from runs.models import (
    HUMAN_SCORER_PREFIX,
    Membership,
    Result,
    ReviewItem,
    ReviewLabel,
    ReviewLabelChange,
    ReviewQueue,
    ReviewSource,
    Run,
)
from runs.review import scores
from runs.review.rubric import MAX_NOTE, criteria_clean, rubric_clean, value_clean
from runs.review.sources import comparison_pairs, source_results

NAME_MAX = 80
MAX_RATERS = 20
CLAIM_TRIES = 5


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > NAME_MAX:
        raise InvalidInput(f"must be 1 to {NAME_MAX} characters", field="name")
    if any(ch in name for ch in "\x00\n\r\t"):
        raise InvalidInput("must be one line of text", field="name")
    return name.strip()


def _clean_reviewers(project_id: int, names: Any) -> list[User]:
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidInput("must be a list of usernames", field="reviewers")
    members = {
        m.user.get_username(): m.user
        for m in Membership.objects.filter(
            project_id=project_id, user__username__in=names
        ).select_related("user")
    }
    for position, name in enumerate(names):
        if name not in members:
            raise InvalidInput(
                f"{name!r} is not a member of the project",
                field=f"reviewers[{position}]",
            )
    return [members[name] for name in dict.fromkeys(names)]


def _checked_raters(raters: Any) -> int:
    if type(raters) is not int or not 1 <= raters <= MAX_RATERS:
        raise InvalidInput(f"must be from 1 to {MAX_RATERS}", field="raters")
    return raters


def queue_create(
    *,
    user: User | AnonymousUser,
    run: Run,
    name: Any,
    source: str = ReviewSource.RUN,
    source_params: dict[str, Any] | None = None,
    other_run: Run | None = None,
    rubric: Any = None,
    raters: Any = 1,
    reviewers: Any = None,
    open_pool: bool | None = None,
    blind: bool = True,
    description: str = "",
) -> ReviewQueue:
    """A queue over an ended run's results (or two runs' outputs, paired).

    Its consensus becomes the run's scorer ``human:<name>`` (and the other
    run's, for a comparison), listed from now on and scored as labels come.
    """
    require(user, run.project, Action.EDIT)
    name = _clean_name(name)
    params = dict(source_params or {})
    comparison = source == ReviewSource.COMPARISON
    scorer_name = f"{HUMAN_SCORER_PREFIX}{name}"
    rubric = rubric_clean(rubric, comparison=comparison, scorer_name=scorer_name)
    raters = _checked_raters(raters)
    named = _clean_reviewers(run.project_id, reviewers)
    if ReviewQueue.objects.filter(project=run.project, name=name).exists():
        raise Conflict(f"the project has a queue named {name!r}")
    runs = [run]
    if comparison:
        if other_run is None:
            raise InvalidInput("choose the run to compare with", field="other_run")
        if other_run.project_id != run.project_id:
            raise NotFound(f"no run {other_run.pk}")
        pairs = comparison_pairs(run=run, other=other_run)
        runs.append(other_run)
    else:
        ids = source_results(run=run, source=source, params=params)
    for each in runs:
        if not each.is_final:
            raise Conflict(
                f"run {each.pk} is still {each.status}: review it once it has ended"
            )
        if scorer_name in each.scorer_names:
            raise Conflict(f"run {each.pk} already has a scorer {scorer_name!r}")
    with transaction.atomic():
        queue = ReviewQueue.objects.create(
            project=run.project,
            name=name,
            description=description,
            source=source,
            source_params=params,
            run=run,
            other_run=other_run if comparison else None,
            rubric=rubric,
            raters=raters,
            open_pool=not named if open_pool is None else open_pool,
            blind=blind,
            created_by=user if isinstance(user, User) else None,
        )
        queue.reviewers.set(named)
        if comparison:
            draw = random.Random()
            items = [
                ReviewItem(queue=queue, position=position, item_id=item, result_id=mine,
                           other_result_id=theirs, swapped=draw.random() < 0.5)
                for position, (item, mine, theirs) in enumerate(pairs)
            ]  # fmt: skip
        else:
            item_of = dict(
                Result.objects.filter(pk__in=ids).values_list("pk", "item_id")
            )
            items = [
                ReviewItem(queue=queue, position=position, item_id=item_of[pk],
                           result_id=pk)
                for position, pk in enumerate(ids)
            ]  # fmt: skip
        ReviewItem.objects.bulk_create(items, batch_size=2_000)
        scores.scorer_attach(queue=queue, user=queue.created_by)
    return queue


def queue_update(
    *, user: User | AnonymousUser, queue: ReviewQueue, changes: dict[str, Any]
) -> ReviewQueue:
    """Change who reviews, how many raters, blindness or the description."""
    require(user, queue.project, Action.EDIT)
    if "raters" in changes:
        raters = _checked_raters(changes["raters"])
        if raters < queue.items.aggregate(most=Max("taken", default=0))["most"]:
            raise Conflict("some items already have more raters than that")
        queue.raters = raters
    for flag in ("open_pool", "blind"):
        if flag in changes:
            if not isinstance(changes[flag], bool):
                raise InvalidInput("must be true or false", field=flag)
            setattr(queue, flag, changes[flag])
    if "description" in changes:
        queue.description = str(changes["description"] or "")
    with transaction.atomic():
        queue.save(update_fields=["raters", "open_pool", "blind", "description"])
        if "reviewers" in changes:
            queue.reviewers.set(
                _clean_reviewers(queue.project_id, changes["reviewers"])
            )
    return queue


def queue_delete(*, user: User | AnonymousUser, queue: ReviewQueue) -> None:
    """Delete a queue, its labels and the scores its consensus gave."""
    require(user, queue.project, Action.EDIT)
    with transaction.atomic():
        scores.scorer_detach(queue=queue)
        queue.delete()


def _named(user: User | AnonymousUser, queue: ReviewQueue) -> bool:
    return queue.open_pool or queue.reviewers.filter(pk=user.pk or 0).exists()


def may_review(user: User | AnonymousUser, queue: ReviewQueue) -> bool:
    return can(user, queue.project, Action.VIEW) and _named(user, queue)


def require_reviewer(user: User | AnonymousUser, queue: ReviewQueue) -> None:
    """A member who may review this queue; NotFound for an outsider."""
    require(user, queue.project, Action.VIEW)
    if not _named(user, queue):
        raise Forbidden(f"you are not a reviewer of the queue {queue.name!r}")


def _claim(queue: ReviewQueue, user: User) -> ReviewLabel | None:
    mine = ReviewLabel.objects.filter(review_item=OuterRef("pk"), reviewer=user)
    candidates = (
        ReviewItem.objects.filter(queue=queue, taken__lt=queue.raters)
        .filter(~Exists(mine))
        .order_by("position")
    )
    if connection.features.has_select_for_update_skip_locked:
        candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    for item in candidates[:CLAIM_TRIES]:
        claimed = ReviewItem.objects.filter(pk=item.pk, taken__lt=queue.raters).update(
            taken=F("taken") + 1
        )
        if claimed:
            return ReviewLabel.objects.create(
                queue=queue, review_item=item, reviewer=user, assigned_at=timezone.now()
            )
    return None


def label_next(*, user: User | AnonymousUser, queue: ReviewQueue) -> ReviewLabel | None:
    """The caller's item to label: one handed to them and not labelled yet,
    else a new one; None when the queue has nothing more for them."""
    require_reviewer(user, queue)
    assert isinstance(user, User)  # require_reviewer: a member
    for _ in range(CLAIM_TRIES):
        pending = ReviewLabel.objects.filter(
            queue=queue, reviewer=user, submitted_at__isnull=True
        ).order_by("assigned_at", "id")
        if label := pending.first():
            return label
        try:
            with transaction.atomic():
                label = _claim(queue, user)
        except IntegrityError:
            # Another request of the same reviewer took an item at once: its
            # claim (and the count it moved) stands, this one rolled back.
            continue
        if (
            label is not None
            or not ReviewItem.objects.filter(queue=queue, taken__lt=queue.raters)
            .exclude(labels__reviewer=user)
            .exists()
        ):
            return label
    return None


def label_save(
    *,
    user: User | AnonymousUser,
    label: ReviewLabel,
    value: Any = None,
    criteria: Any = None,
    note: Any = None,
    side: bool = True,
) -> ReviewLabel:
    """Set (or change) a reviewer's label; kept in the history, and the item's
    consensus written to the run's scores.

    A preference comes as "left" / "right" / "tie" as the reviewer saw it
    (``side``), or as "a" / "b" / "tie"; a label without a value keeps only
    its note (or criteria) until one is given.
    """
    queue = label.queue
    require_reviewer(user, queue)
    if label.reviewer_id != user.pk:
        raise NotFound(f"no label {label.pk}")
    rubric = queue.rubric
    if queue.is_comparison and side and value in ("left", "right"):
        value = _side(value, swapped=label.review_item.swapped)
    if value is not None:
        value = value_clean(rubric, value, field="value")
    cleaned = criteria_clean(rubric, criteria, field="criteria")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
        raise InvalidInput(
            f"must be text of at most {MAX_NOTE} characters", field="note"
        )
    if note and not rubric["note"]:
        raise InvalidInput("this queue takes no notes", field="note")
    now = timezone.now()
    with transaction.atomic():
        locked = (
            ReviewLabel.objects.select_for_update(of=("self",))
            .select_related("review_item", "queue")
            .get(pk=label.pk)
        )
        if value is not None:
            locked.value = value
        locked.criteria = {**locked.criteria, **cleaned}
        if note is not None:
            locked.note = note
        complete = locked.value is not None and set(locked.criteria) >= set(
            rubric["criteria"]
        )
        if complete and locked.submitted_at is None:
            locked.submitted_at = now
        locked.updated_at = now
        locked.save()
        ReviewLabelChange.objects.create(
            label=locked, user=user, changed_at=now, value=locked.value,
            criteria=locked.criteria, note=locked.note,
        )  # fmt: skip
        scores.item_scores_write(queue=queue, review_item=locked.review_item)
    return locked


def _side(value: str, *, swapped: bool) -> str:
    """The run a side shown to the reviewer is: "a" (the queue's run) or "b"."""
    left = "b" if swapped else "a"
    right = "a" if swapped else "b"
    return left if value == "left" else right


def label_for_item(
    *, user: User | AnonymousUser, queue: ReviewQueue, review_item_id: int
) -> ReviewLabel:
    """The caller's label of an item handed to them (POST /labels)."""
    require_reviewer(user, queue)
    try:
        return ReviewLabel.objects.select_related("review_item", "queue").get(
            queue=queue, review_item_id=review_item_id, reviewer_id=user.pk
        )
    except ReviewLabel.DoesNotExist:
        raise NotFound(
            f"item {review_item_id} has not been handed to you in this queue"
        ) from None

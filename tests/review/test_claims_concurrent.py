"""Reviewers asking at once: never past k raters, never an item twice.

Real threads with their own connections: on PostgreSQL they run at once (the
claim skips locked candidates and its UPDATE rechecks the count); on SQLite
their write transactions take turns.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.contrib.auth.models import User
from django.db import connection

from runs.models import Membership, ReviewItem, ReviewLabel
from runs.review.services import label_next, label_save, queue_create
from tests.factories import arithmetic_items, make_dataset
from tests.review.builders import ended_run

REVIEWERS = 8
ITEMS = 20
RATERS = 3


def _together(work, args_list) -> list[BaseException]:
    """Run ``work(*args)`` for each args in threads started at once; their errors."""
    barrier = threading.Barrier(len(args_list))
    errors: list[BaseException] = []

    def body(*args):
        try:
            barrier.wait()
            work(*args)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=args) for args in args_list]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return errors


@pytest.mark.django_db(transaction=True)
def test_reviewers_at_once_never_exceed_k_raters_nor_repeat_an_item(project, bob):
    dataset = make_dataset(project, arithmetic_items(ITEMS))
    queue = queue_create(user=bob, run=ended_run(dataset), name="busy", raters=RATERS)
    users = []
    for n in range(REVIEWERS):
        user = User.objects.create_user(f"reviewer{n}")
        Membership.objects.create(project=project, user=user, role="viewer")
        users.append(user)

    def review_all(user):
        while (label := label_next(user=user, queue=queue)) is not None:
            label_save(user=user, label=label, value="pass")

    assert _together(review_all, [(user,) for user in users]) == []
    per_item = Counter(
        ReviewLabel.objects.filter(queue=queue).values_list("review_item", flat=True)
    )
    assert sorted(per_item.values()) == [RATERS] * ITEMS
    pairs = ReviewLabel.objects.values_list("review_item", "reviewer")
    assert len(set(pairs)) == len(pairs) == ITEMS * RATERS
    assert all(item.taken == RATERS for item in ReviewItem.objects.filter(queue=queue))
    assert not ReviewLabel.objects.filter(submitted_at__isnull=True).exists()


@pytest.mark.django_db(transaction=True)
def test_one_reviewer_asking_twice_at_once_gets_one_item(project, bob, victor):
    dataset = make_dataset(project, arithmetic_items(5))
    queue = queue_create(user=bob, run=ended_run(dataset), name="tabs", raters=2)
    got: list[int] = []

    def ask():
        label = label_next(user=victor, queue=queue)
        assert label is not None
        got.append(label.pk)

    assert _together(ask, [()] * 4) == []
    assert len(set(got)) == 1
    assert ReviewLabel.objects.filter(reviewer=victor).count() == 1
    assert (
        sum(ReviewItem.objects.filter(queue=queue).values_list("taken", flat=True)) == 1
    )

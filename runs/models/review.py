"""Human review: queues over a run or a comparison, their items, labels and history."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from runs.models.datasets import Item
from runs.models.fields import unique, user_kept_null
from runs.models.projects import Authored, owning_project
from runs.models.results import Result
from runs.models.runs import Run

# The scorer name a queue's consensus is stored under on its run's results.
HUMAN_SCORER_PREFIX = "human:"


class ReviewSource(models.TextChoices):
    RUN = "run", "Every result of a run"
    FILTER = "filter", "A results filter"
    CLUSTER = "cluster", "A failure cluster"
    SAMPLE = "sample", "A sample stratified by verdict"
    COMPARISON = "comparison", "A comparison of two runs"


class RubricKind(models.TextChoices):
    PASS_FAIL = "pass_fail", "Pass or fail"
    SCALE = "scale", "A 1 to 5 scale"
    LABELS = "labels", "Labels from a list"
    PREFERENCE = "preference", "Which side is better"


class ReviewQueue(Authored):
    """Items of a run (or pairs of two runs' outputs) for people to label.

    ``rubric`` is cleaned by ``runs.review.rubric``; ``raters`` is how many
    reviewers label each item. Reviewers are the named ``reviewers`` or, with
    ``open_pool``, any member of the project.
    """

    project = owning_project("review_queues")
    name = models.CharField(max_length=80)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=16, choices=ReviewSource.choices)
    # The source's parameters: a filter's query, a cluster's key, a sample's
    # size, scorer and seed.
    source_params = models.JSONField(default=dict, blank=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    # Of a comparison: the other run (``run`` is the baseline).
    other_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    rubric = models.JSONField(default=dict)
    raters = models.PositiveSmallIntegerField(default=1)
    open_pool = models.BooleanField(default=True)
    blind = models.BooleanField(default=True)
    reviewers = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="review_queues"
    )

    class Meta:
        ordering = ["project", "-created_at", "-id"]
        constraints = [
            unique("project", "name", name="review_queue_name_unique"),
            models.CheckConstraint(
                condition=Q(raters__gte=1), name="review_queue_raters_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def scorer_name(self) -> str:
        return f"{HUMAN_SCORER_PREFIX}{self.name}"

    @property
    def is_comparison(self) -> bool:
        return self.source == ReviewSource.COMPARISON


class ReviewItem(models.Model):
    """One thing to label: a result, or two runs' results for one item.

    ``taken`` counts the reviewers it has been handed to; it never exceeds
    the queue's raters (the claim is a conditional UPDATE). ``swapped``: the
    other run's output is shown on the left.
    """

    queue = models.ForeignKey(
        ReviewQueue, on_delete=models.CASCADE, related_name="items"
    )
    position = models.PositiveIntegerField()
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    result = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="+")
    other_result = models.ForeignKey(
        Result, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    swapped = models.BooleanField(default=False)
    taken = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["queue", "position"]
        constraints = [
            unique("queue", "position", name="review_item_position_unique"),
            unique("queue", "result", name="review_item_result_unique"),
        ]
        indexes = [models.Index(fields=["queue", "taken", "position"])]

    def __str__(self) -> str:
        return f"item {self.position} of queue {self.queue_id}"


class ReviewLabel(models.Model):
    """One reviewer's assignment to one item, and their label once given.

    A reviewer gets an item once at most (the unique constraint); the label
    is ``value`` (and ``criteria``, by name) with a note; ``submitted_at`` is
    set once a label is given. Its changes are kept in ``ReviewLabelChange``.
    """

    queue = models.ForeignKey(
        ReviewQueue, on_delete=models.CASCADE, related_name="labels"
    )
    review_item = models.ForeignKey(
        ReviewItem, on_delete=models.CASCADE, related_name="labels"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    value = models.JSONField(null=True, blank=True)
    criteria = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    assigned_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["queue", "reviewer", "assigned_at", "id"]
        constraints = [
            unique("review_item", "reviewer", name="review_label_once_per_reviewer"),
            # One item in hand at a time: two requests of one reviewer at
            # once (two tabs) cannot take two items.
            unique(
                "queue",
                "reviewer",
                condition=Q(submitted_at__isnull=True),
                name="review_label_one_open_per_reviewer",
            ),
        ]
        indexes = [models.Index(fields=["queue", "reviewer", "assigned_at"])]

    def __str__(self) -> str:
        return f"{self.reviewer_id} on {self.review_item_id}: {self.value!r}"

    @property
    def submitted(self) -> bool:
        return self.submitted_at is not None


class LabelRecord(models.Model):
    """A label as someone set it at one moment: who (kept when the user goes),
    when, and the label (``value``, ``criteria`` by name, a note)."""

    user = user_kept_null(related_name="+")
    changed_at = models.DateTimeField()
    value = models.JSONField(null=True, blank=True)
    criteria = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        abstract = True


class ReviewLabelChange(LabelRecord):
    """A label as it was set at one moment, by whom: the history of labels."""

    label = models.ForeignKey(
        ReviewLabel, on_delete=models.CASCADE, related_name="changes"
    )

    class Meta:
        ordering = ["label", "changed_at", "id"]

    def __str__(self) -> str:
        return f"label {self.label_id} at {self.changed_at}: {self.value!r}"


class ReviewAdjudication(LabelRecord):
    """An adjudicator's label that settles a disputed item, by whom and when.

    The latest one of an item is its consensus; earlier ones are its history.
    """

    review_item = models.ForeignKey(
        ReviewItem, on_delete=models.CASCADE, related_name="adjudications"
    )

    class Meta:
        ordering = ["review_item", "changed_at", "id"]
        indexes = [models.Index(fields=["review_item", "changed_at"])]

    def __str__(self) -> str:
        return f"item {self.review_item_id} settled at {self.changed_at}"

"""A run's retry passes: each time its errors were run again inside it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.models.runs import Run


class RetryPass(models.Model):
    """One retry inside a run: when, how long, what it ran and what it changed.

    The run keeps the timing of its first execution; each pass has its own.
    Its counts move in the transaction that stores the retried results
    (runs/records/retries.py).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        COMPLETED_WITH_ERRORS = "completed_with_errors", "Completed with errors"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        # Left under way when another pass began (it never ended on record).
        INTERRUPTED = "interrupted", "Interrupted"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="retry_passes")
    status = models.CharField(
        max_length=32, choices=Status.choices, default=Status.PENDING
    )
    # What it was asked to run: the statuses (and cluster) chosen, the stored
    # results to run again and the (item, epoch) pairs without a result.
    statuses = models.JSONField(default=list)
    cluster = models.CharField(max_length=200, blank=True)
    results = models.PositiveIntegerField(default=0)
    missing = models.PositiveIntegerField(default=0)
    # Stored results it replaced with a new outcome; of them, those that had
    # an answer (re-drawn); and those that kept their previous outcome (the
    # retry did no better).
    replaced = models.PositiveIntegerField(default=0)
    redrawn = models.PositiveIntegerField(default=0)
    kept = models.PositiveIntegerField(default=0)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The end of the run's execution before this pass: the run keeps it.
    run_finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "created_at", "id"]

    def __str__(self) -> str:
        return f"retry pass {self.pk} of run {self.run_id}: {self.status}"

    @property
    def active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)

    @property
    def wall_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

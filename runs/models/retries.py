"""A run's retry passes: each time its errors were run again inside it."""

from __future__ import annotations

from django.db import models

from runs.models.projects import Authored
from runs.models.runs import Run, RunStatus


class RetryPass(Authored):
    """One retry inside a run: when, how long, what it ran and what it changed.

    The run keeps the timing of its first execution; each pass has its own.
    It ends as its run does, with the run's status. Its counts move in the
    transaction that stores the retried results (runs/records/retries.py).
    """

    Status = RunStatus

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="retry_passes")
    status = models.CharField(
        max_length=32, choices=RunStatus.choices, default=RunStatus.PENDING
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
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The end of the run's execution before this pass: the run keeps it.
    run_finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "created_at", "id"]
        verbose_name_plural = "retry passes"

    def __str__(self) -> str:
        return f"retry pass {self.pk} of run {self.run_id}: {self.status}"

    @property
    def active(self) -> bool:
        return self.status in (RunStatus.PENDING, RunStatus.RUNNING)

    @property
    def seconds(self) -> float | None:
        """How long the pass took, from its executor's first claim to its end."""
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

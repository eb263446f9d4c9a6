"""Saved evaluations, their history, their schedules and the ticks of those."""

from __future__ import annotations

from django.db import models

from runs.models.alerts import AlertChannel
from runs.models.datasets import Dataset
from runs.models.fields import kept_null, unique, user_kept_null
from runs.models.projects import Authored, Target, owning_project
from runs.models.runs import Run


class Evaluation(Authored):
    """A dataset, a target, scorers, run options and a baseline policy, saved
    under a name to be run again: on demand, on a schedule, or by another
    system through the API. Each run it makes names it (``Run.evaluation``)."""

    class DatasetPolicy(models.TextChoices):
        FIXED = "fixed", "This version"
        LATEST = "latest", "The latest version"

    class BaselinePolicy(models.TextChoices):
        PREVIOUS = "previous", "The previous run of this evaluation"
        FIXED = "fixed", "A fixed run"
        NONE = "none", "None"

    project = owning_project("evaluations")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The version chosen; with LATEST, the newest ready version of its name in
    # the project when a run starts.
    dataset = models.ForeignKey(
        Dataset, on_delete=models.PROTECT, related_name="evaluations"
    )
    dataset_policy = models.CharField(
        max_length=16, choices=DatasetPolicy.choices, default=DatasetPolicy.FIXED
    )
    # A stored target, or an ad-hoc kind and configuration (as a new run takes).
    target = kept_null(Target, related_name="evaluations")
    target_kind = models.CharField(max_length=32, blank=True)
    target_config = models.JSONField(default=dict, blank=True)
    scorers = models.JSONField(default=list)
    options = models.JSONField(default=dict, blank=True)
    baseline_policy = models.CharField(
        max_length=16, choices=BaselinePolicy.choices, default=BaselinePolicy.PREVIOUS
    )
    baseline_run = kept_null(Run, related_name="baseline_of")
    # Scorer name -> the least pass rate (0 to 1) a run of it should reach.
    pass_rate_floors = models.JSONField(default=dict, blank=True)
    # Where a run's regressions are announced (channels of its own project).
    channels = models.ManyToManyField(
        AlertChannel, blank=True, related_name="evaluations"
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = user_kept_null(related_name="+")

    class Meta:
        ordering = ["project", "name"]
        constraints = [unique("project", "name", name="evaluation_name_unique")]

    def __str__(self) -> str:
        return self.name

    @property
    def target_label(self) -> str:
        if self.target_id is not None and self.target is not None:
            return str(self.target)
        return self.target_kind or "(no target)"


class EvaluationChange(models.Model):
    """One change to an evaluation: who made it, when, and what changed."""

    class Action(models.TextChoices):
        CREATED = "created", "Created"
        UPDATED = "updated", "Updated"
        SCHEDULED = "scheduled", "Schedule added"
        UNSCHEDULED = "unscheduled", "Schedule removed"

    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, related_name="changes"
    )
    action = models.CharField(max_length=16, choices=Action.choices)
    # Field -> [before, after] (JSON values); for a schedule, its expression.
    changes = models.JSONField(default=dict, blank=True)
    user = user_kept_null(related_name="+")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.evaluation_id} {self.action} at {self.at:%Y-%m-%d %H:%M}"

    @property
    def shown(self) -> list[tuple[str, list[object]]]:
        """What its history line shows: every field an update changed; of a
        creation, the fields given a value (not the empty ones)."""
        items = list(self.changes.items())
        if self.action == self.Action.UPDATED:
            return items
        return [(n, v) for n, v in items if any(x not in (None, "", [], {}) for x in v)]


class Schedule(models.Model):
    """A cron expression, read in a time zone, that starts its evaluation."""

    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, related_name="schedules"
    )
    cron = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    enabled = models.BooleanField(default=True)
    # The latest tick handled (or when the schedule began): ticks after it and
    # up to now are due.
    last_tick_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = user_kept_null(related_name="+")

    class Meta:
        ordering = ["evaluation", "pk"]

    def __str__(self) -> str:
        return f"{self.cron} ({self.timezone})"


class ScheduleTick(models.Model):
    """A tick of a schedule that a process took: at most one per (schedule,
    time), whichever processes tick at once (the unique constraint)."""

    class Outcome(models.TextChoices):
        MADE_RUN = "made_run", "Started a run"
        CAUGHT_UP = "caught_up", "Caught up (ticks were missed)"
        SKIPPED_RUNNING = "skipped_running", "Skipped: the previous run is going"
        FAILED = "failed", "Could not start"

    schedule = models.ForeignKey(
        Schedule, on_delete=models.CASCADE, related_name="ticks"
    )
    tick_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    # The run it made, or the run still going that made it skip.
    run = kept_null(Run, related_name="+")
    # Ticks before this one that passed while nothing ticked (caught up once).
    missed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-tick_at", "-id"]
        constraints = [unique("schedule", "tick_at", name="schedule_tick_unique")]

    def __str__(self) -> str:
        return f"{self.schedule_id} at {self.tick_at:%Y-%m-%d %H:%M} ({self.outcome})"

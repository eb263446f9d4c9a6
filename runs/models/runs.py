"""Runs, their statuses and their shards."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from runs.models.datasets import Dataset
from runs.models.fields import kept_null
from runs.models.projects import Authored, Target, owning_project
from runs.models.run_counts import RunCounts


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors", "Completed with errors"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# An executor beats every two seconds; after this long without a beat its run
# is taken for orphaned and may be resumed by another.
HEARTBEAT_STALE_SECONDS = 15.0

FINAL_RUN_STATUSES = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.COMPLETED_WITH_ERRORS,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
    }
)


class Run(RunCounts, Authored):
    Status = RunStatus

    project = owning_project("runs")
    name = models.CharField(max_length=200, blank=True)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="runs")
    dataset_hash = models.CharField(max_length=64)
    target = kept_null(Target, related_name="runs")
    # Frozen copies: what this run really used, whatever happens to the target.
    target_name = models.CharField(max_length=200, blank=True)
    target_kind = models.CharField(max_length=32)
    target_config = models.JSONField(default=dict)
    scorers = models.JSONField(default=list)
    # Scorers whose scores people give (review queues' consensus,
    # ``human:<queue>``): listed after ``scorers``, never executed.
    human_scorers = models.JSONField(default=list, blank=True)
    options = models.JSONField(default=dict)
    parent: models.ForeignKey[Run | None] = kept_null("self", related_name="children")

    status = models.CharField(
        max_length=32,
        choices=RunStatus.choices,
        default=RunStatus.PENDING,
        db_index=True,
    )
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)

    # Counts, kept in step with the stored results in the same transaction.
    total = models.PositiveIntegerField(default=0)
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    timed_out = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.FloatField(default=0.0)
    # Results whose tokens have no price: their cost is not in ``cost``.
    unpriced = models.PositiveIntegerField(default=0)
    # Whether any of its results has a trajectory: set in the transaction that
    # stores its first steps (executor/store.py, traces/services.py), so that
    # a run without one is spared every read of steps.
    has_steps = models.BooleanField(default=False)
    # The price table as it was when the run first started (runs/calls/pricing.py):
    # one run, one price per model, whatever is edited while it goes.
    prices = models.JSONField(null=True, blank=True)
    # What the run was expected to cost before it started (runs/estimates/),
    # and what that figure was made from: past runs of the target over the
    # dataset, or a sample of items sent to it.
    estimated_cost = models.FloatField(null=True, blank=True)
    estimate_basis = models.JSONField(null=True, blank=True)
    # Only the dataset's first this many items (by index), when set: a cost
    # sample's few. Whatever executes the run (a resume after a restart, a
    # retry, the shards of the distributed mode) runs these alone, and its
    # counts are of them.
    item_limit = models.PositiveIntegerField(null=True, blank=True)

    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    executor_id = models.CharField(max_length=100, blank=True)
    # While the executor backs off (429s, timeouts, rising latency: the target
    # is saturated): the concurrency it allows now.
    throttle_limit = models.PositiveIntegerField(null=True, blank=True)
    # The latency of its recent calls, in seconds, as its executor last saw it.
    call_latency = models.FloatField(null=True, blank=True)
    # Items its workers hold (attempting, backing off or scoring), as of the
    # executor's last heartbeat.
    in_flight = models.PositiveIntegerField(default=0)
    # Moves each time stored results are taken back for a retry in the run.
    revision = models.PositiveIntegerField(default=0)
    # The revision the run's score tallies (ScoreTally) add up at: its
    # scorers' figures are their sum while it is the run's revision. Set by
    # the first batch the writer stores of a run with nothing stored
    # (executor/store.py); NULL for others, as for runs stored before
    # tallies were kept.
    tally_revision = models.IntegerField(null=True, blank=True)
    # Retries spent out of the run's retry budget, by every executor of the
    # run (its shards): counted here so that the budget is the run's.
    retries_used = models.PositiveIntegerField(default=0)
    # Stored results that retries replaced in place with a new outcome, and
    # of them those that had an answer: a retry changes what the run reports,
    # which its pages, API and exports say. Counted from the first retry pass
    # recorded; earlier retries left no record.
    retry_replaced = models.PositiveIntegerField(default=0)
    retry_replaced_answers = models.PositiveIntegerField(default=0)
    # The saved evaluation that made it, and how: by hand, by one of its
    # schedules (which), or through the API.
    # Named by string: their module imports this one (the checker's Django
    # plug-in resolves the names; through a helper it could not).
    evaluation = models.ForeignKey(
        "runs.Evaluation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    schedule = models.ForeignKey(
        "runs.Schedule",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    evaluation_trigger = models.CharField(max_length=16, blank=True)
    # The end its evaluation was told of (revision:status): told once per end.
    evaluation_end = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]

    @property
    def scorer_names(self) -> list[str]:
        """The run's scorers by the name their scores carry, in its order."""
        names = [spec.get("name") or spec.get("kind") for spec in self.scorers]
        return names + [name for name in self.human_scorers if name not in names]

    @property
    def epochs(self) -> int:
        """How many times each item runs (the run's ``epochs`` option)."""
        return max(int(self.options.get("epochs", 1) or 1), 1)

    @property
    def tallying(self) -> bool:
        """Whether its batches keep score tallies (runs/records/tallies.py):
        they began and nothing has rewritten its results since
        (``tally_revision``), and it has one epoch (with several, the pass
        rate's interval is clustered by item, which sums cannot give)."""
        return self.tally_revision == self.revision and self.epochs == 1

    @property
    def tallied(self) -> bool:
        """Whether the going run's scorers' figures are read from its tallies."""
        return not self.is_final and self.tallying

    @property
    def errored(self) -> int:
        return self.failed + self.timed_out

    @property
    def skipped(self) -> int:
        """Items that never produced a result (only meaningful once the run ended)."""
        return max(self.total - self.processed, 0) if self.is_final else 0

    @property
    def pending(self) -> int:
        return max(self.total - self.processed, 0) if not self.is_final else 0

    @property
    def in_flight_now(self) -> int:
        """Pending items its executor holds now, as of its last heartbeat."""
        return min(self.in_flight, self.pending) if self.alive else 0

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_RUN_STATUSES

    @property
    def alive(self) -> bool:
        """An executor has reported on this unfinished run in the last seconds."""
        if self.is_final or self.heartbeat_at is None:
            return False
        age = (timezone.now() - self.heartbeat_at).total_seconds()
        return age < HEARTBEAT_STALE_SECONDS

    @property
    def results_version(self) -> str:
        """Changes whenever a result or a score of this run is stored.

        Results and scores are added, or rewritten in place by a retry, in
        the transaction that moves the counts (executor/store.py); a retry
        also moves ``revision``. What else rewrites them (a re-score) must
        add what it moves here. Keys of what is cached from a run's results
        (its results table, its scorer figures).
        """
        return ":".join(
            str(part)
            for part in (
                self.pk,
                self.created_at.timestamp(),
                self.revision,
                self.status,
                self.finished_at and self.finished_at.timestamp(),
                self.succeeded,
                self.failed,
                self.timed_out,
                self.cancelled,
            )
        )

    @property
    def backing_off(self) -> bool:
        return self.throttle_limit is not None and not self.is_final

    @property
    def wall_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class RunShard(models.Model):
    """A range of a run's items, executed as one procrastinate job.

    Many workers execute shards of one run at once, so the claim, the
    heartbeat and the end are per shard; the run ends when its last shard does
    (``runs/executor/shard_store.py``).
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        # Ended early with an error that stops its whole run (fail fast, the
        # deadline, storage, an executor error), or never ran for that: the
        # run's other shards stop, and the run fails with the first error.
        STOPPED = "stopped"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="shards")
    # Item indexes start <= index < stop.
    start = models.PositiveIntegerField()
    stop = models.PositiveIntegerField()
    job_id = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING
    )
    # The executor that holds it now (host:pid:token), and when it last beat.
    worker = models.CharField(max_length=100, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Items its executor holds now, as of its last heartbeat (the run's
    # in_flight is the sum over its running shards).
    in_flight = models.PositiveIntegerField(default=0)
    # While its executor backs off, the concurrency it allows now (the run's
    # throttle_limit is the smallest among its live shards), and the latency
    # of its recent calls (the run's is the slowest of its live shards').
    throttle_limit = models.PositiveIntegerField(null=True, blank=True)
    call_latency = models.FloatField(null=True, blank=True)
    # How many times a worker claimed it: more than one after a crash or a
    # hand-back.
    claims = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["run", "start"]
        constraints = [
            models.UniqueConstraint(fields=["run", "start"], name="unique_shard_start")
        ]
        indexes = [models.Index(fields=["run", "status"])]

    def __str__(self) -> str:
        return f"run {self.run_id} items {self.start}-{self.stop - 1}"

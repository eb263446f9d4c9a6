"""What a run stores: results, scores, scoring passes, figures and verdicts."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models
from django.db.models import F, Func, IntegerField, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from runs.models.datasets import Item
from runs.models.fields import unique, user_kept_null
from runs.models.runs import HEARTBEAT_STALE_SECONDS, Run


class ResultStatus(models.TextChoices):
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    TIMED_OUT = "timed_out", "Timed out"
    CANCELLED = "cancelled", "Cancelled"


# A result's status is its target call's: "succeeded" says nothing of the
# answer, which its scores judge. Shown beside scores, it reads "answered".
CALL_STATUS_LABELS = {ResultStatus.SUCCEEDED.value: "Answered"}


def call_status_label(status: str) -> str:
    """A result status as shown beside its scores."""
    return CALL_STATUS_LABELS.get(status) or status.replace("_", " ").capitalize()


class ErrorKind(models.TextChoices):
    TRANSIENT = "transient", "Transient"
    QUOTA = "quota", "Quota"
    PERMANENT = "permanent", "Permanent"
    TIMEOUT = "timeout", "Timeout"
    CANCELLED = "cancelled", "Cancelled"
    # An agent that stopped to wait for input or approval: neither an answer
    # nor a failure worth retrying; its payload is kept on the attempt.
    SUSPENDED = "suspended", "Suspended"


# A run that stops (cancel, fail fast, cost budget, another shard's error)
# closes its calls in flight as "cancelled"; its deadline closes them as
# "timed_out" with this error type. Either way the call never finished: the
# result is no sample of the target (not passed, not failed), left out of pass
# rates and of a comparison's pairs and counted apart as "stopped in flight".
# A call that ran out of its own timeout is a failure, of another error type.
DEADLINE_ERROR_TYPE = "Deadline"
STOPPED_IN_FLIGHT = Q(status=ResultStatus.CANCELLED) | Q(
    status=ResultStatus.TIMED_OUT, error_type=DEADLINE_ERROR_TYPE
)


class JSONArrayLength(Func):
    """How many elements a JSON array holds, counted by the database."""

    function = "json_array_length"
    arity = 1
    output_field = IntegerField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, function="jsonb_array_length", **extra)


# How many attempts a result's log holds, in SQL: its stored count, or for a
# row stored before the count was kept (NULL), its log's length. Both
# databases evaluate COALESCE's arguments in turn, so a counted row's log is
# never parsed.
ATTEMPTS_MADE = Coalesce(F("attempts_made"), JSONArrayLength(F("attempts")))


# What a result says of its item's outcome, in the order the rows' writer
# (runs/records/rows.py) and the export (runs/analysis/export.py) list it.
RESULT_OUTCOME = ("status", "output", "error_kind", "error_type", "error_message")


class Usage(models.Model):
    """What a model call cost: its tokens, their price and the model that used them."""

    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.FloatField(null=True, blank=True)
    # The model the target (or the judge) reported, or was configured with.
    model = models.CharField(max_length=200, blank=True)

    class Meta:
        abstract = True


class Result(Usage):
    """The final outcome of one item in one epoch of a run."""

    Status = ResultStatus

    # No index of its own: every index below starts with the run (one B-tree
    # less to update for each result stored).
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="results", db_index=False
    )
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="results")
    item_index = models.PositiveIntegerField()
    epoch = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=ResultStatus.choices)
    output = models.JSONField(null=True, blank=True)
    error_kind = models.CharField(max_length=16, choices=ErrorKind.choices, blank=True)
    error_type = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    # The error's signature and its masked message (runs/records/signatures.py):
    # the same failure, however its ids and numbers vary, has the same ones.
    error_signature = models.CharField(max_length=64, blank=True)
    error_pattern = models.CharField(max_length=300, blank=True)
    attempts = models.JSONField(default=list)
    # The last attempt's latency, and the time the result took in all: from
    # its first attempt's start to its last attempt's end, failed attempts
    # and back-off included (of the execution that gave its outcome).
    latency_ms = models.FloatField(null=True, blank=True)
    time_to_result_ms = models.FloatField(null=True, blank=True)
    # Attempts of its log that failed (an error kind), retried or not: the
    # summary adds them up without reading the logs.
    failed_attempts = models.PositiveIntegerField(default=0)
    # How many attempts its log holds (``len(attempts)``), kept by the rows'
    # writer: a run's summary, charts and export count its retried results
    # without parsing every log (json_array_length was a fifth of a run's
    # end). NULL in rows stored before it was kept: read ATTEMPTS_MADE. Not a
    # PositiveIntegerField: its CHECK would have the column's ADD COLUMN test
    # every stored result (SQLite parses each log then, PostgreSQL scans the
    # table under its exclusive lock).
    attempts_made = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    # Chosen for a retry that has not rewritten it yet: out of the run's
    # counts until it is rewritten or the run ends (then it keeps its outcome).
    retry_pending = models.BooleanField(default=False)

    class Meta:
        ordering = ["run", "item_index", "epoch"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "epoch"], name="result_run_item_epoch_unique"
            )
        ]
        # Each index costs every result stored an update: none is a prefix of
        # another, and each puts a new row near its run's last ones (a
        # column in no order, as latency_ms was, costs a write at a random
        # place: bench/README, "The latency index").
        indexes = [
            models.Index(fields=["run", "item_index", "epoch"]),
            models.Index(fields=["run", "finished_at"]),
            # A run's error clusters: counted, and their first items read, on it.
            models.Index(
                fields=["run", "error_signature", "item_index", "epoch"],
                name="result_run_signature_idx",
            ),
            # A run's results of one status (its succeeded results' latencies,
            # a results filter while it goes).
            models.Index(fields=["run", "status"]),
            # A run's results of one error kind, in dataset order, while it
            # goes (an ended run's are filtered in its result table).
            # Partial: only results with an error are in it.
            models.Index(
                fields=["run", "error_kind", "item_index", "epoch"],
                condition=~Q(error_kind=""),
                name="result_run_error_kind_idx",
            ),
            # Partial: only rows waiting for a retry (few, and briefly), so a
            # lookup of a run's other rows never picks it over the unique index.
            models.Index(
                fields=["run"],
                condition=Q(retry_pending=True),
                name="result_run_retry_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.item_index} epoch {self.epoch}: {self.status}"

    @property
    def attempt_count(self) -> int:
        return len(self.attempts)


class Score(Usage):
    """One scorer's verdict on a result.

    Its usage is what a judge model used for it (llm_judge); empty for others.
    """

    # No index of its own: the unique (result, scorer) constraint's serves.
    result = models.ForeignKey(
        Result, on_delete=models.CASCADE, related_name="scores", db_index=False
    )
    scorer = models.CharField(max_length=100)
    value = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    # Of a failing score only: the signature of its reason, or of its error.
    reason_signature = models.CharField(max_length=64, blank=True)
    # A conditional scorer whose condition did not hold: neither passed nor
    # failed, its reason says why ("skipped: exact_match passed").
    skipped = models.BooleanField(default=False)

    class Meta:
        ordering = ["result", "scorer"]
        constraints = [
            unique("result", "scorer", name="score_result_scorer_unique"),
            models.CheckConstraint(
                condition=Q(error="") | Q(value__isnull=True),
                name="score_error_has_no_value",
            ),
            models.CheckConstraint(
                condition=Q(skipped=False)
                | Q(value__isnull=True, passed__isnull=True, error=""),
                name="score_skipped_has_no_verdict",
            ),
        ]
        indexes = [
            # Failing scores only (the others have no reason signature): a
            # run's are grouped without reading the scores table.
            models.Index(
                fields=["result", "scorer", "reason_signature"],
                condition=~Q(reason_signature=""),
                name="score_failing_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scorer}={self.value}"


class ScoreTally(models.Model):
    """What one batch of a run's stored results adds to its scorers' figures
    (runs/records/tallies.py): a row per scorer, and one (``scorer`` "") of
    the batch's results. Written only with the batch; a run's figures are the
    sum of its rows while ``Run.tally_revision`` is its revision."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    scorer = models.CharField(max_length=100, blank=True)
    # The results row's: results stored, and those a stop cut short.
    results = models.IntegerField(default=0)
    stopped = models.IntegerField(default=0)
    # A scorer's: its scores, those with a value, passed, errored, skipped.
    rows = models.IntegerField(default=0)
    scored = models.IntegerField(default=0)
    passed = models.IntegerField(default=0)
    errored = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0)
    value_sum = models.FloatField(null=True)
    low = models.FloatField(null=True)
    high = models.FloatField(null=True)
    prompt_tokens = models.BigIntegerField(null=True)
    completion_tokens = models.BigIntegerField(null=True)

    def __str__(self) -> str:
        return f"run {self.run_id} {self.scorer or 'results'}"


class ScoringPass(models.Model):
    """One pass of scorers over a run's stored outputs: the first, or a re-score.

    A run's scores are what its passes wrote, each pass adding or replacing
    scores by scorer name. The first pass is the run's own execution; it is
    recorded from the run when the run is first re-scored (runs/rescore/services.py).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        INTERRUPTED = "interrupted", "Interrupted"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="passes")
    initial = models.BooleanField(default=False)
    # The scorer specs this pass ran ({"name", "kind", "params"}, cleaned).
    scorers = models.JSONField(default=list)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING
    )
    error = models.TextField(blank=True)
    # Results with an output, to score; those whose scores are stored; and
    # the scores of this pass that are errors (a scorer raised or timed out).
    total = models.PositiveIntegerField(default=0)
    scored = models.PositiveIntegerField(default=0)
    errored = models.PositiveIntegerField(default=0)
    user = user_kept_null(related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    executor_id = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["run", "created_at", "id"]
        verbose_name_plural = "scoring passes"
        constraints = [
            # At most one pass of a run is under way at a time.
            unique(
                "run",
                condition=Q(status__in=["pending", "running"]),
                name="scoring_pass_one_active_per_run",
            )
        ]

    def __str__(self) -> str:
        return f"scoring pass {self.pk} of run {self.run_id}: {self.status}"

    @property
    def active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)

    @property
    def stale(self) -> bool:
        """Under way on paper, but no executor has reported on it for a while."""
        if not self.active:
            return False
        last_sign_of_life = self.heartbeat_at or self.created_at
        age = (timezone.now() - last_sign_of_life).total_seconds()
        return age >= HEARTBEAT_STALE_SECONDS

    @property
    def scorer_names(self) -> list[str]:
        return [spec.get("name") or spec.get("kind") for spec in self.scorers]


def derived_from(related_name: str) -> models.OneToOneField[Run, Run]:
    """The run a row of a ``RunDerived`` model was computed from: its key."""
    return models.OneToOneField(
        Run, primary_key=True, on_delete=models.CASCADE, related_name=related_name
    )


class RunDerived(models.Model):
    """Computed from a finished run's results and stored beside it.

    Read only while ``version`` is the run's ``results_version``: a retry or
    a re-score that changes the results makes it stale.
    """

    # What a row holds, as its name says it: "figures of run 3".
    holds: ClassVar[str]

    version = models.CharField(max_length=200)
    computed_at = models.DateTimeField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        # The run is the key.
        return f"{self.holds} of run {self.pk}"


class RunFigures(RunDerived):
    """A finished run's summary and chart data, stored when it ends.

    ``version`` also holds the figures' format; stale figures are computed
    and stored again.
    """

    holds = "figures"

    run = derived_from(holds)
    data = models.JSONField()
    compute_seconds = models.FloatField()

    class Meta:
        verbose_name_plural = "run figures"


class RunVerdicts(RunDerived):
    """A finished single-epoch run's verdict and value per item and scorer.

    Stored when the run ends, beside its figures, and read by comparisons:
    two runs' verdicts pair in memory instead of in a join of both runs'
    results and scores.
    """

    holds = "verdicts"

    run = derived_from(holds)
    scorers = models.JSONField()
    data = models.BinaryField()

    class Meta:
        verbose_name_plural = "run verdicts"


class RunResultTable(RunDerived):
    """A finished run's results as columns, in dataset order: each result's
    id, item, status, error kind and signature, and per scorer its verdict
    and failing reason's signature (``analysis/result_table.py``).

    Read by the results table and the failure clusters: a filter, its count,
    any page and each cluster's size are found in memory, and only the rows
    shown are read from the database.
    """

    holds = "result table"

    run = derived_from("result_table")
    scorers = models.JSONField()
    data = models.BinaryField()

    class Meta:
        verbose_name_plural = "run result tables"


class RunContentClusters(RunDerived):
    """A run's failing items grouped by what they contain (input, output and
    expected answer), computed once per results version and vectoriser.

    ``version`` holds the format, the vectoriser (TF-IDF or the project's
    embeddings endpoint) and the run's ``results_version``.
    """

    holds = "content clusters"

    run = derived_from("content_clusters")
    data = models.JSONField()
    compute_seconds = models.FloatField()

    class Meta:
        verbose_name_plural = "run content clusters"

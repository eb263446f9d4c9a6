from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Project(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        EDITOR = "editor", "Editor"
        ADMIN = "admin", "Admin"

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="memberships"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.EDITOR)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "user"], name="membership_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class ReadyDatasetManager(models.Manager["Dataset"]):
    """Datasets that may be seen: an import in progress is nobody's yet."""

    def get_queryset(self) -> models.QuerySet[Dataset]:
        return super().get_queryset().filter(status=Dataset.Status.READY)


class Dataset(models.Model):
    """One immutable version of a named dataset.

    An import writes its items in batches under a dataset in the ``importing``
    state, which no page, endpoint or selector sees (``objects`` hides it);
    one last update makes it ``ready`` and gives it its version number.
    """

    class Status(models.TextChoices):
        IMPORTING = "importing", "Importing"
        READY = "ready", "Ready"

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="datasets"
    )
    name = models.CharField(max_length=200)
    version = models.PositiveIntegerField(default=1)
    description = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, db_index=True)
    item_count = models.PositiveIntegerField(default=0)
    source_format = models.CharField(max_length=16, blank=True)
    source_name = models.CharField(max_length=255, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.READY
    )
    # Items whose expected answer is not null, and the source field it came from.
    expected_count = models.PositiveIntegerField(default=0)
    expected_field = models.CharField(max_length=255, blank=True)
    # Each source field and how many records have a value for it.
    field_counts = models.JSONField(default=dict, blank=True)
    # The last sign of life of an import in progress; a stale one is cleaned up.
    import_touched_at = models.DateTimeField(null=True, blank=True)

    all_objects = models.Manager()
    objects = ReadyDatasetManager()

    class Meta:
        ordering = ["project", "name", "-version"]
        default_manager_name = "objects"
        base_manager_name = "all_objects"
        constraints = [
            # Imports in progress have no version yet (0).
            models.UniqueConstraint(
                fields=["project", "name", "version"],
                condition=Q(status="ready"),
                name="dataset_version_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Item(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField()
    external_id = models.CharField(max_length=255)
    input = models.JSONField()
    expected = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["dataset", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "index"], name="item_index_unique"
            ),
            models.UniqueConstraint(
                fields=["dataset", "external_id"], name="item_external_id_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id}#{self.index} ({self.external_id})"


class Target(models.Model):
    """A named configuration of something that answers items.

    Secrets are never stored: ``config`` names environment variables instead.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="targets"
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)
    config = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name"], name="target_name_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


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


class Run(models.Model):
    Status = RunStatus

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200, blank=True)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="runs")
    dataset_hash = models.CharField(max_length=64)
    target = models.ForeignKey(
        Target, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # Frozen copies: what this run really used, whatever happens to the target.
    target_name = models.CharField(max_length=200, blank=True)
    target_kind = models.CharField(max_length=32)
    target_config = models.JSONField(default=dict)
    scorers = models.JSONField(default=list)
    options = models.JSONField(default=dict)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
    )

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
    # The price table as it was when the run first started (runs/pricing.py):
    # one run, one price per model, whatever is edited while it goes.
    prices = models.JSONField(null=True, blank=True)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    executor_id = models.CharField(max_length=100, blank=True)
    # While the executor backs off after 429s: the concurrency it allows now.
    throttle_limit = models.PositiveIntegerField(null=True, blank=True)
    # Items its workers hold (attempting, backing off or scoring), as of the
    # executor's last heartbeat.
    in_flight = models.PositiveIntegerField(default=0)
    # Moves each time stored results are taken back for a retry in the run.
    revision = models.PositiveIntegerField(default=0)
    # Retries spent out of the run's retry budget, by every executor of the
    # run (its shards): counted here so that the budget is the run's.
    retries_used = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]

    def __str__(self) -> str:
        return self.name or f"Run {self.pk}"

    @property
    def processed(self) -> int:
        return self.succeeded + self.failed + self.timed_out + self.cancelled

    @property
    def scorer_names(self) -> list[str]:
        """The run's scorers by the name their scores carry, in its order."""
        return [spec.get("name") or spec.get("kind") for spec in self.scorers]

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


class ResultStatus(models.TextChoices):
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    TIMED_OUT = "timed_out", "Timed out"
    CANCELLED = "cancelled", "Cancelled"


class ErrorKind(models.TextChoices):
    TRANSIENT = "transient", "Transient"
    QUOTA = "quota", "Quota"
    PERMANENT = "permanent", "Permanent"
    TIMEOUT = "timeout", "Timeout"
    CANCELLED = "cancelled", "Cancelled"
    # An agent that stopped to wait for input or approval: neither an answer
    # nor a failure worth retrying; its payload is kept on the attempt.
    SUSPENDED = "suspended", "Suspended"


class Result(models.Model):
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
    # The error's signature and its masked message (runs/analysis/signatures.py):
    # the same failure, however its ids and numbers vary, has the same ones.
    error_signature = models.CharField(max_length=64, blank=True)
    error_pattern = models.CharField(max_length=300, blank=True)
    attempts = models.JSONField(default=list)
    latency_ms = models.FloatField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.FloatField(null=True, blank=True)
    # The model the target reported (or was configured with) for its tokens.
    model = models.CharField(max_length=200, blank=True)
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
        # another ((run, status) is served by (run, status, latency_ms)).
        indexes = [
            models.Index(fields=["run", "item_index", "epoch"]),
            models.Index(fields=["run", "finished_at"]),
            # A run's error clusters: counted, and their first items read, on it.
            models.Index(
                fields=["run", "error_signature", "item_index", "epoch"],
                name="result_run_signature_idx",
            ),
            # Latency percentiles of a run's succeeded results, read in order.
            models.Index(fields=["run", "status", "latency_ms"]),
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


class Score(models.Model):
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
    # What a judge model used for this score (llm_judge); empty for others.
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.FloatField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["result", "scorer"]
        constraints = [
            models.UniqueConstraint(
                fields=["result", "scorer"], name="score_result_scorer_unique"
            ),
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


class ApiKey(models.Model):
    """A bearer key for the JSON API; only its hash is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ProjectSecret(models.Model):
    """A named secret of a project, such as a provider's API key.

    ``ciphertext`` is the value encrypted with a key kept outside the database
    (``runs.secrets.store``); the value itself is never shown again once set.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="secrets"
    )
    name = models.CharField(max_length=100)
    ciphertext = models.TextField(editable=False)
    # Where the value may be sent (``runs.secrets.destinations`` patterns);
    # none: nowhere.
    hosts = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name"], name="project_secret_name_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.project})"


class RunFigures(models.Model):
    """A finished run's summary and chart data, stored when it ends.

    Read only while ``version`` is the run's ``results_version`` (with the
    figures' format): a retry or a re-score that changes the results makes
    them stale, and they are computed and stored again.
    """

    run = models.OneToOneField(
        Run, primary_key=True, on_delete=models.CASCADE, related_name="figures"
    )
    version = models.CharField(max_length=200)
    data = models.JSONField()
    computed_at = models.DateTimeField()
    compute_seconds = models.FloatField()

    class Meta:
        verbose_name_plural = "run figures"

    def __str__(self) -> str:
        return f"figures of run {self.run_id}"


class RunVerdicts(models.Model):
    """A finished single-epoch run's verdict and value per item and scorer.

    Stored when the run ends, beside its figures, and read by comparisons:
    two runs' verdicts pair in memory instead of in a join of both runs'
    results and scores. Read only under the run's ``results_version``, as
    ``RunFigures``.
    """

    run = models.OneToOneField(
        Run, primary_key=True, on_delete=models.CASCADE, related_name="verdicts"
    )
    version = models.CharField(max_length=200)
    scorers = models.JSONField()
    data = models.BinaryField()
    computed_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "run verdicts"

    def __str__(self) -> str:
        return f"verdicts of run {self.run_id}"


class ScoringPass(models.Model):
    """One pass of scorers over a run's stored outputs: the first, or a re-score.

    A run's scores are what its passes wrote, each pass adding or replacing
    scores by scorer name. The first pass is the run's own execution; it is
    recorded from the run when the run is first re-scored (runs/rescoring.py).
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
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    executor_id = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["run", "created_at", "id"]
        constraints = [
            # At most one pass of a run is under way at a time.
            models.UniqueConstraint(
                fields=["run"],
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


class ModelPrice(models.Model):
    """What a model's tokens cost, in US dollars per million.

    ``model`` is a model's exact name, or a prefix ending in ``*`` that prices
    every model whose name starts with it (``gpt-4o-mini*`` covers
    ``gpt-4o-mini-2024-07-18``); an exact name wins, then the longest prefix.
    A row replaces the entry of the same name in ``EVALSITE_PRICES``.
    """

    model = models.CharField(
        max_length=200,
        unique=True,
        validators=[
            RegexValidator(
                r"^(?:[^*\s](?:[^*]*[^*\s])?\*?|\*)$",
                "a model name, or a prefix ending in * (a * may only end it)",
            )
        ],
        help_text="The model's name as the endpoint reports it, or a prefix "
        "ending in * (an exact name wins, then the longest prefix).",
    )
    prompt_per_million = models.DecimalField(
        "prompt (USD per 1M tokens)",
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
    )
    completion_per_million = models.DecimalField(
        "completion (USD per 1M tokens)",
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
    )
    currency = models.CharField(max_length=3, default="USD", editable=False)
    note = models.CharField(
        max_length=200, blank=True, help_text="Where the price comes from, and when."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]

    def __str__(self) -> str:
        return (
            f"{self.model}: ${self.prompt_per_million} / ${self.completion_per_million}"
        )


class RateBucket(models.Model):
    """What paces calls to one target across processes, when there is no Redis.

    ``tat`` is the token bucket's theoretical arrival time (GCRA), in seconds
    of the database's clock; ``level`` counts the halvings of concurrency that
    a burst of 429s announced, in force until ``until``
    (``runs/executor/shared_limits.py``).
    """

    key = models.CharField(max_length=100, primary_key=True)
    tat = models.FloatField(default=0.0)
    level = models.PositiveIntegerField(default=0)
    last = models.FloatField(default=0.0)
    until = models.FloatField(default=0.0)

    def __str__(self) -> str:
        return self.key


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
    # While its executor backs off after 429s, the concurrency it allows now
    # (the run's throttle_limit is the smallest among its live shards).
    throttle_limit = models.PositiveIntegerField(null=True, blank=True)
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

"""The steps of a result's trajectory: model calls and tool calls, in order."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from runs.models.fields import unique
from runs.models.results import Result, Usage

# A step's payloads (arguments, output) are kept up to this many bytes of
# compact JSON each; a longer one is cut, its full size kept.
STEP_PAYLOAD_BYTES = 16_384


class StepKind(models.TextChoices):
    MODEL = "model", "Model call"
    TOOL = "tool", "Tool call"


class Step(Usage):
    """One step of a result's trajectory (``runs/plugins/steps.py`` says what
    a target reports). Rewritten with its result: a retry that replaces the
    result replaces its steps; deleted with it.

    Payloads are bounded: ``arguments`` and ``output`` are kept up to
    ``STEP_PAYLOAD_BYTES`` of JSON each, a longer one cut (a string, the start
    of its JSON) with its full size in ``arguments_bytes`` / ``output_bytes``.
    """

    Kind = StepKind

    # No index of its own: the unique (result, index) constraint's serves.
    result = models.ForeignKey(
        Result, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=StepKind.choices)
    # The tool's name, or the model that answered.
    name = models.CharField(max_length=200)
    # A stable hash of tool and arguments (runs.plugins.steps.call_hash): the
    # same call, however its keys are ordered; empty for a model call.
    call_hash = models.CharField(max_length=16, blank=True)
    call_id = models.CharField(max_length=200, blank=True)
    arguments = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    arguments_bytes = models.PositiveIntegerField(default=0)
    output_bytes = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    error_type = models.CharField(max_length=200, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    # When the step started, where its source says (a span's start time).
    started_at = models.DateTimeField(null=True, blank=True)
    # The span it came from (OTLP), hex: a span sent twice is stored once.
    span_id = models.CharField(max_length=16, blank=True)

    class Meta:
        ordering = ["result", "index"]
        constraints = [
            unique("result", "index", name="step_result_index_unique"),
            unique(
                "result",
                "span_id",
                name="step_result_span_unique",
                condition=~Q(span_id=""),
            ),
        ]

    def __str__(self) -> str:
        return f"result {self.result_id} step {self.index}: {self.kind} {self.name}"

    @property
    def cut(self) -> bool:
        """Whether a payload was cut to its bound."""
        return max(self.arguments_bytes, self.output_bytes) > STEP_PAYLOAD_BYTES

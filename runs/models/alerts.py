"""Where a project's regression alerts go, and what became of each one sent."""

from __future__ import annotations

from django.db import models

from runs.models.fields import kept_null, unique
from runs.models.projects import Authored, owning_project
from runs.models.runs import Run


class AlertChannel(Authored):
    """A place a project's alerts are sent: a webhook, Slack, or email.

    A URL (a webhook's or Slack's) is a credential of sorts, Slack's most of
    all: it is stored encrypted as project secrets are (``runs.secrets.store``)
    and shown only as its origin. A webhook's signing secret likewise: it is
    shown once, when it is made.
    """

    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Webhook (signed JSON)"
        SLACK = "slack", "Slack incoming webhook"
        EMAIL = "email", "Email"

    project = owning_project("alert_channels")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    url_ciphertext = models.TextField(blank=True, editable=False)
    # scheme://host[:port] of the URL: what the pages and the API show of it.
    url_origin = models.CharField(max_length=300, blank=True, editable=False)
    secret_ciphertext = models.TextField(blank=True, editable=False)
    emails = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [unique("project", "name", name="alert_channel_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def destination(self) -> str:
        """What the pages show of where it sends."""
        if self.kind == self.Kind.EMAIL:
            return ", ".join(self.emails)
        return self.url_origin


class AlertDelivery(models.Model):
    """One alert (or test) to one channel, with every attempt to send it."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        RETRYING = "retrying", "Waiting to retry"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    channel = models.ForeignKey(
        AlertChannel, on_delete=models.CASCADE, related_name="deliveries"
    )
    run = kept_null(Run, related_name="+")
    test = models.BooleanField(default=False)
    payload = models.JSONField(default=dict)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING
    )
    # [{"number", "at", "outcome" ("ok", "error"), "status_code", "error",
    #   "seconds"}], one per attempt, in order.
    attempts = models.JSONField(default=list, blank=True)
    # When its next attempt is due (now, or once a back-off has passed);
    # while an attempt is made, when its maker is taken for gone (its process
    # died mid-send) and another may make it. None: due now, or ended.
    due_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["channel", "-created_at"]),
            # The deliveries still to send, by when they are due.
            models.Index(
                fields=["due_at"],
                condition=models.Q(status__in=["pending", "sending", "retrying"]),
                name="alert_delivery_unended_due",
            ),
        ]
        verbose_name_plural = "alert deliveries"

    def __str__(self) -> str:
        return f"{self.channel} #{self.pk}: {self.status}"

    @property
    def is_final(self) -> bool:
        return self.status in (self.Status.DELIVERED, self.Status.FAILED)

    @property
    def last_attempt(self) -> dict[str, object] | None:
        return self.attempts[-1] if self.attempts else None

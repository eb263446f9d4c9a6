"""Projects and who may use them: members, API keys, secrets and targets."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from runs.models.fields import unique, user_kept_null


class Authored(models.Model):
    """Who made a row (kept when the user goes) and when."""

    created_by = user_kept_null()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class Project(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # An OpenAI-compatible /embeddings endpoint for content clusters
    # (base_url, model, api_key_secret or api_key_env); empty: TF-IDF.
    embeddings = models.JSONField(default=dict, blank=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )
    # An LLM judge is calibrated when its Cohen's kappa against the people's
    # verdicts reaches this, over at least judge_min_items items.
    judge_kappa_threshold = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Cohen's kappa a judge needs against people to be calibrated.",
    )
    judge_min_items = models.PositiveIntegerField(
        default=50,
        validators=[MinValueValidator(1)],
        help_text="Items judged by both a judge and people before it can be "
        "calibrated.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def owning_project(related_name: str) -> models.ForeignKey[Project, Project]:
    """The project a row belongs to: deleted with it."""
    return models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name=related_name
    )


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        EDITOR = "editor", "Editor"
        ADMIN = "admin", "Admin"

    project = owning_project("memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.EDITOR)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [unique("project", "user", name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


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

    project = owning_project("secrets")
    name = models.CharField(max_length=100)
    ciphertext = models.TextField(editable=False)
    # Where the value may be sent (``runs.secrets.destinations`` patterns);
    # none: nowhere.
    hosts = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    created_by = user_kept_null(related_name="+")
    updated_by = user_kept_null(related_name="+")

    class Meta:
        ordering = ["project", "name"]
        constraints = [unique("project", "name", name="project_secret_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.project})"


class Target(Authored):
    """A named configuration of something that answers items.

    Secrets are never stored: ``config`` names environment variables instead.
    """

    project = owning_project("targets")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)
    config = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [unique("project", "name", name="target_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

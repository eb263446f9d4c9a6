"""Datasets and their items."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from runs.models.fields import unique
from runs.models.projects import Authored, owning_project


class ReadyDatasetManager(models.Manager["Dataset"]):
    """Datasets that may be seen: an import in progress is nobody's yet."""

    def get_queryset(self) -> models.QuerySet[Dataset]:
        return super().get_queryset().filter(status=Dataset.Status.READY)


class Dataset(Authored):
    """One immutable version of a named dataset.

    An import writes its items in batches under a dataset in the ``importing``
    state, which no page, endpoint or selector sees (``objects`` hides it);
    one last update makes it ``ready`` and gives it its version number.
    """

    class Status(models.TextChoices):
        IMPORTING = "importing", "Importing"
        READY = "ready", "Ready"

    project = owning_project("datasets")
    name = models.CharField(max_length=200)
    version = models.PositiveIntegerField(default=1)
    description = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, db_index=True)
    item_count = models.PositiveIntegerField(default=0)
    source_format = models.CharField(max_length=16, blank=True)
    source_name = models.CharField(max_length=255, blank=True)
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
            unique(
                "project",
                "name",
                "version",
                condition=Q(status="ready"),
                name="dataset_version_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Item(models.Model):
    # No index of its own: the unique (dataset, index) serves every lookup by
    # dataset, and a million items took 10 MB more and a slower import with it.
    dataset = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, related_name="items", db_index=False
    )
    index = models.PositiveIntegerField()
    external_id = models.CharField(max_length=255)
    input = models.JSONField()
    expected = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["dataset", "index"]
        constraints = [
            unique("dataset", "index", name="item_index_unique"),
            unique("dataset", "external_id", name="item_external_id_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id}#{self.index} ({self.external_id})"

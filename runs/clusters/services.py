"""Writes from clusters: a dataset made of a cluster's items, and the
project's embeddings endpoint for clusters by content."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib.auth.models import User

from runs.access import Action, require
from runs.analysis.cluster_members import cluster_filter
from runs.analysis.embeddings import FIELD, clean_embeddings
from runs.calls.chat_client import SECRETS
from runs.datasets.importers import ItemRow, dataset_create_from_rows
from runs.errors import InvalidInput
from runs.models import (
    Dataset,
    Item,
    Project,
    Result,
    Run,
)
from runs.secrets.store import resolve_secrets


def dataset_create_from_cluster(
    *, run: Run, user: User, key: str, name: str
) -> Dataset:
    """A new dataset (or a new version of ``name``) of a cluster's items.

    Each item of the run's dataset with a result in the cluster is copied once,
    in dataset order, with its id, input, expected answer and metadata.
    """
    require(user, run.project, Action.EDIT)
    members = Result.objects.filter(run=run).filter(cluster_filter(key, run=run))
    items = Item.objects.filter(
        dataset_id=run.dataset_id, pk__in=members.values("item_id")
    ).order_by("index")
    fields = ("index", "external_id", "input", "expected", "metadata")

    def read_rows() -> Iterator[ItemRow]:
        for row in items.values_list(*fields).iterator(chunk_size=500):
            yield ItemRow(*row)

    return dataset_create_from_rows(
        project=run.project,
        user=user,
        name=name,
        read_rows=read_rows,
        source_format="cluster",
        source_name=f"run {run.pk}, cluster {key}",
        description=f"The items of cluster {key} of run #{run.pk} ({run}).",
    )


def project_embeddings_set(
    *, project: Project, user: User, config: dict[str, Any] | None
) -> Project:
    """Name the project's OpenAI-compatible embeddings endpoint (base URL,
    model, key as a project secret bound to its host), or none ({}): content
    clusters are then computed with it, else with TF-IDF. Project admins only.
    """
    require(user, project, Action.MANAGE)
    cleaned = clean_embeddings(config)
    if cleaned:
        # The key must exist and be bound to the endpoint's host now, not
        # only when clusters are computed.
        try:
            resolve_secrets(project_id=project.pk, refs=SECRETS, config=cleaned)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, field=f"{FIELD}.{exc.field}") from None
    project.embeddings = cleaned
    project.save(update_fields=["embeddings"])
    return project

"""Writes from clusters: a dataset made of a cluster's items."""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.auth.models import User

from runs.access import Action, require
from runs.analysis.cluster_members import cluster_filter
from runs.datasets.importers import ItemRow, dataset_create_from_rows
from runs.models import (
    Dataset,
    Item,
    Result,
    Run,
)


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

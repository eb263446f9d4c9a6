"""The results a cluster key stands for in a run, whatever its kind."""

from __future__ import annotations

from django.db.models import Q

from runs.analysis import cluster_keys
from runs.analysis.content_clusters import content_members
from runs.models import Run


def cluster_filter(key: str, *, run: Run) -> Q:
    """The results of ``run`` in the cluster ``key`` (over ``Result``): by
    signature, or, for a content key, the run's current content cluster of
    that key (InvalidInput naming ``cluster`` when it has none)."""
    cluster_keys.parse_cluster_key(key)
    if cluster_keys.is_content_key(key):
        return Q(pk__in=content_members(run=run, key=key))
    return cluster_keys.cluster_filter(key)

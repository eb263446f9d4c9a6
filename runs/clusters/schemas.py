"""The API schemas of a run's clusters."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema


class ClusterItemOut(Schema):
    result_id: int
    index: int
    epoch: int
    external_id: str


class MoveOut(Schema):
    to: str = Field(
        description=(
            "where these results are now: 'passed' (the scorer passes them), "
            "'no error' (they no longer error), 'cluster' (in the cluster key), "
            "'not scored' (no verdict of the scorer) or 'missing' (not in the run)"
        )
    )
    count: int
    key: str = Field(description="the run's cluster they are in; '' for others")
    pattern: str = Field(description="that cluster's pattern; '' for others")


class ClusterOut(Schema):
    key: str = Field(
        description=(
            "names the cluster in ?cluster= filters: the error signature, or "
            "score:<scorer>:<signature> for failing scores"
        )
    )
    signature: str
    kind: str = Field(
        description="the error kind; for failing scores 'failed' or 'error'"
    )
    error_type: str
    pattern: str = Field(description="the message with what varies masked")
    example: str = Field(description="one message of the cluster, unmasked")
    count: int
    share: float | None = Field(description="count / the run's stored results")
    baseline_count: int | None = Field(
        description="the count in the baseline run; null without a baseline"
    )
    change: str | None = Field(
        description="new, grown, shrunk, same or vanished; null without a baseline"
    )
    items: list[ClusterItemOut] = Field(description="the first items, in order")
    moves: list[MoveOut] = Field(
        description=(
            "of a shrunk or vanished cluster: where the baseline's results of "
            "it are in this run (same item and epoch), biggest first: how many "
            "now pass and how many moved to another cluster (a timeout, say), "
            "so that a move reads as one; those still in it are not listed. "
            "Empty otherwise"
        )
    )


class ScoreClusterOut(ClusterOut):
    scorer: str


class RunClustersOut(Schema):
    run: int
    baseline: int | None
    results: int = Field(description="the run's stored results (shares' base)")
    error_clusters: int = Field(description="error clusters in all")
    failed_score_clusters: int = Field(description="failing-score clusters in all")
    errors: list[ClusterOut]
    failed_scores: list[ScoreClusterOut]

    @staticmethod
    def resolve_run(obj: Any) -> int:
        return obj.run.pk

    @staticmethod
    def resolve_baseline(obj: Any) -> int | None:
        return obj.baseline.pk if obj.baseline is not None else None

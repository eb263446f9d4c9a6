"""The API schemas of a run's clusters."""

from __future__ import annotations

from typing import Any, Literal

from ninja import Field, Schema

from runs.web.schemas import BodyIn


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


class RunAndBaselineOut(Schema):
    """The run and the baseline it is compared with, by id."""

    @staticmethod
    def resolve_run(obj: Any) -> int:
        return obj.run.pk

    @staticmethod
    def resolve_baseline(obj: Any) -> int | None:
        return obj.baseline.pk if obj.baseline is not None else None


class RunClustersOut(RunAndBaselineOut):
    by: Literal["signature"] = Field(
        "signature", description="grouped by signature (?by=signature, the default)"
    )
    run: int
    baseline: int | None
    results: int = Field(description="the run's stored results (shares' base)")
    error_clusters: int = Field(description="error clusters in all")
    failed_score_clusters: int = Field(description="failing-score clusters in all")
    errors: list[ClusterOut]
    failed_scores: list[ScoreClusterOut]


class ContentClusterOut(Schema):
    key: str = Field(
        description=(
            "names the cluster in ?cluster= filters, retry and save-as-dataset: "
            "content:<digest of its results>; a key of clusters computed before "
            "the run's results changed is refused"
        )
    )
    name: str = Field(description="the title, else the distinctive terms joined")
    terms: list[str] = Field(
        description="its distinctive terms: highest mean TF-IDF weight in it "
        "above that in the other failing items"
    )
    title: str = Field(
        description="a one-line name the run's judge model wrote; '' without"
    )
    unclustered: bool = Field(description="the items that fit no cluster")
    count: int
    retryable: int = Field(
        description="of its results, those a retry may run (errors); a retry "
        "of the cluster is refused unless all are"
    )
    share: float | None = Field(description="count / the run's stored results")
    baseline_count: int | None
    change: str | None = Field(
        description="new, grown, shrunk, same or vanished; null without a baseline"
    )
    jaccard: float | None = Field(
        description="the Jaccard index of its items and those of the baseline "
        "cluster it was matched with; null when matched by name, or not matched"
    )
    items: list[ClusterItemOut]
    moves: list[MoveOut] = Field(
        description="of a shrunk or vanished cluster: where the baseline's items "
        "of it are in this run ('passed': no longer failing; 'cluster': in "
        "another cluster, by key; 'missing'), biggest first"
    )


class RunContentClustersOut(RunAndBaselineOut):
    by: Literal["content"] = "content"
    run: int
    baseline: int | None
    results: int = Field(description="the run's stored results (shares' base)")
    failing: int = Field(
        description="failing results clustered (errors and failing scores, not "
        "those stopped in flight)"
    )
    vectoriser: str = Field(
        description="'tfidf', or embeddings:<model>@<endpoint> of the project"
    )
    note: str = Field(description="why a fallback was taken; '' when none was")
    clusters: list[ContentClusterOut] = Field(description="biggest first")
    unclustered: ContentClusterOut | None = Field(
        description="the failing results that fit no cluster"
    )


class EmbeddingsIn(BodyIn):
    base_url: str = Field(
        description="the API's base URL, before /embeddings (the network "
        "policy applies)"
    )
    model: str
    api_key_secret: str = Field(
        "", description="the project secret holding the key, bound to its host"
    )
    api_key_env: str = Field(
        "", description="or an environment variable the operator allows"
    )


class EmbeddingsOut(Schema):
    project: int
    embeddings: dict[str, Any] = Field(
        description="base_url, model and the key's name; {} for none (TF-IDF)"
    )

    @staticmethod
    def resolve_project(obj: Any) -> int:
        return obj.pk

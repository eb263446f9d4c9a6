"""The endpoint of a run's error and failing-score clusters."""

from __future__ import annotations

from typing import Annotated, Literal

from ninja import Field, Router

from runs.analysis.clusters import (
    ITEMS_PER_CLUSTER,
    MAX_ITEMS_PER_CLUSTER,
    RunClusters,
    run_clusters_cached,
)
from runs.analysis.content_clusters import ContentClusters, run_content_clusters
from runs.clusters.schemas import (
    EmbeddingsIn,
    EmbeddingsOut,
    RunClustersOut,
    RunContentClustersOut,
)
from runs.clusters.services import project_embeddings_set
from runs.models import Project
from runs.projects.selectors import project_get
from runs.results.selectors import run_get
from runs.web.api import ERRORS, READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId, ErrorOut

cluster_router = Router(tags=["runs"])
embeddings_router = Router(tags=["projects"])


@cluster_router.get(
    "/{run_id}/clusters",
    response={
        200: RunClustersOut | RunContentClustersOut,
        **READ_ERRORS,
        400: ErrorOut,
    },
)
def get_run_clusters(
    request: ApiRequest,
    run_id: DbId,
    baseline: DbId | None = None,
    items: Annotated[int, Field(ge=0, le=MAX_ITEMS_PER_CLUSTER)] = ITEMS_PER_CLUSTER,
    by: Literal["signature", "content"] = "signature",
) -> RunClusters | ContentClusters:
    """The run's errors grouped by signature and failing scores by scorer and
    reason, biggest first; with ``by=content``, its failing items grouped by
    what they contain (input, output, expected answer), computed once per
    results version. Against ``baseline``, how each cluster moved."""
    run = run_get(user=request.auth, run_id=run_id)
    other = run_get(user=request.auth, run_id=baseline) if baseline else None
    if by == "content":
        return run_content_clusters(run=run, baseline=other, items_per_cluster=items)
    return run_clusters_cached(run=run, baseline=other, items_per_cluster=items)


@embeddings_router.get(
    "/{project_id}/embeddings", response={200: EmbeddingsOut, **READ_ERRORS}
)
def get_embeddings(request: ApiRequest, project_id: DbId) -> Project:
    """The project's embeddings endpoint for clusters by content ({}: TF-IDF)."""
    return project_get(user=request.auth, project_id=project_id)


@embeddings_router.put(
    "/{project_id}/embeddings", response={200: EmbeddingsOut, **ERRORS}
)
def set_embeddings(
    request: ApiRequest, project_id: DbId, payload: EmbeddingsIn
) -> Project:
    """Name the project's OpenAI-compatible embeddings endpoint; project
    admins only. Content clusters are then computed from its vectors."""
    project = project_get(user=request.auth, project_id=project_id)
    config = payload.model_dump(exclude_defaults=True)
    return project_embeddings_set(project=project, user=request.auth, config=config)


@embeddings_router.delete(
    "/{project_id}/embeddings", response={200: EmbeddingsOut, **ERRORS}
)
def delete_embeddings(request: ApiRequest, project_id: DbId) -> Project:
    """Go back to TF-IDF for content clusters; project admins only."""
    project = project_get(user=request.auth, project_id=project_id)
    return project_embeddings_set(project=project, user=request.auth, config={})

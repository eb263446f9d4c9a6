"""The JSON API: each capability's router, composed under ``/api/v1``."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from ninja.security import django_auth

from runs.alerts.api import channel_router
from runs.catalogue.api import scorer_router, tool_router
from runs.clusters.api import cluster_router, embeddings_router
from runs.compare.api import compare_router, plan_router
from runs.datasets.api import dataset_router
from runs.errors import DomainError, Forbidden, InvalidInput, TooManyRequests
from runs.estimates.api import estimate_router
from runs.evaluations.api import evaluation_router
from runs.judges.api import judge_router, judge_settings_router
from runs.leaderboard.api import leaderboard_router
from runs.projects.api import (
    ApiKeyAuth,
    docs_access,
    key_router,
    project_router,
    secret_router,
)
from runs.rescore.api import rescore_router
from runs.results.api import run_router
from runs.retry.api import retry_router
from runs.review.api import review_router
from runs.targets.api import target_router
from runs.traces.api import otlp_router
from runs.trajectories.api import (
    result_trajectory_router,
    run_steps_router,
    trajectory_router,
)
from runs.web.api import EvalsiteAPI
from runs.web.pages import log_refusal

logger = logging.getLogger(__name__)

api = EvalsiteAPI(
    title="evalsite API",
    version="1",
    description=(
        "Datasets, targets and runs of the projects you belong to. Authenticate "
        "with your session (and its CSRF token) or `Authorization: Bearer <key>`; "
        "create a key on the API keys page (/account/keys/) or with "
        "`python manage.py create_api_key USERNAME`."
    ),
    auth=[ApiKeyAuth(), django_auth],
    docs_decorator=docs_access,
)
api.add_router("/datasets", dataset_router)
api.add_router("/targets", target_router)
# Before the runs' own: "/runs/{run_id}" would take "/runs/estimate".
api.add_router("/runs", estimate_router)
api.add_router("/runs", run_router)
api.add_router("/projects", project_router)
api.add_router("/keys", key_router)
api.add_router("/scorers", scorer_router)
api.add_router("/projects", secret_router)
api.add_router("/compare", compare_router)
api.add_router("/leaderboard", leaderboard_router)
api.add_router("/plan", plan_router)
api.add_router("/runs", cluster_router)
api.add_router("/runs", retry_router)
api.add_router("/runs", rescore_router)
api.add_router("/otlp", otlp_router)
api.add_router("/tools", tool_router)
api.add_router("/alert-channels", channel_router)
api.add_router("/runs", judge_router)
api.add_router("/evaluations", evaluation_router)
api.add_router("/projects", embeddings_router)
api.add_router("/projects", judge_settings_router)
api.add_router("/review-queues", review_router)
api.add_router("/results", result_trajectory_router)
api.add_router("/trajectories", trajectory_router)
api.add_router("/runs", run_steps_router)


@api.exception_handler(DomainError)
def domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    if isinstance(exc, InvalidInput):
        body = exc.as_dict()
    else:
        body = {"detail": str(exc), "field": None, "line": None}
    response = api.create_response(request, body, status=exc.status_code)
    if isinstance(exc, Forbidden):
        log_refusal(request, response, exc)
    if isinstance(exc, TooManyRequests):
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(Exception)
def server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    """Any other error: logged with its traceback, answered as JSON."""
    logger.exception("%s %s failed", request.method, request.path, exc_info=exc)
    return api.create_response(request, {"detail": "Internal server error"}, status=500)

"""The clusters page of a run, and saving a cluster as a dataset."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from runs.access import Action, can
from runs.analysis.cluster_keys import is_content_key
from runs.analysis.clusters import run_clusters_cached
from runs.analysis.content_clusters import run_content_clusters
from runs.analysis.step_clusters import run_failing_steps
from runs.clusters.services import dataset_create_from_cluster
from runs.compare.selectors import run_compare_choices, run_compare_choices_key
from runs.datasets.selectors import dataset_names, run_dataset_names_key
from runs.errors import Conflict, InvalidInput
from runs.records import page_state, pagecache
from runs.results.selectors import run_get
from runs.web.pages import query_id
from runs.web.requests import AuthedRequest

# Runs over the same dataset a run's clusters may be compared with.
BASELINE_CHOICES = 50


@require_GET
def run_clusters(request: AuthedRequest, run_id: int) -> HttpResponse:
    """A run's failure clusters, by signature (and, with trajectories, by
    failing step) or (``?by=content``) by what the failing items contain,
    against a baseline run chosen on the page."""
    baseline_id = query_id(request.GET.get("baseline"))

    def state() -> tuple[Any, ...] | None:
        # The run's and the baseline's page states (their rows, scoring passes
        # and the user's role; a going run's by the second: what the clusters
        # are computed from), the runs offered as baselines and the project's
        # dataset names. None (not cached): not the user's to see, or a
        # re-score at work.
        user_id = request.user.pk
        runs = (
            page_state.run_page_key(user_id=user_id, run_id=run_id),
            page_state.run_page_key(user_id=user_id, run_id=baseline_id)
            if baseline_id
            else (),
        )
        if None in runs:
            return None
        return (
            runs,
            run_compare_choices_key(
                user_id=user_id, run_id=run_id, limit=BASELINE_CHOICES
            ),
            run_dataset_names_key(run_id=run_id),
        )

    def build() -> tuple[dict[str, Any], int]:
        run = run_get(user=request.user, run_id=run_id)
        baseline = (
            run_get(user=request.user, run_id=baseline_id) if baseline_id else None
        )
        by_content = request.GET.get("by") == "content"
        context = {
            "run": run,
            "by_content": by_content,
            "baseline_pk": baseline.pk if baseline is not None else None,
            "clusters": run_clusters_cached(run=run, baseline=baseline)
            if not by_content
            else None,
            "content": run_content_clusters(run=run, baseline=baseline)
            if by_content
            else None,
            "failing_steps": run_failing_steps(run) if not by_content else None,
            "baselines": run_compare_choices(
                user=request.user, run=run, limit=BASELINE_CHOICES
            ),
            "dataset_names": dataset_names(project_id=run.project_id),
            "can_edit": can(request.user, run.project, Action.EDIT),
        }
        return context, 200

    # The query string (by, baseline) is in the key: pagecache keys it.
    return pagecache.render_current(
        request, "runs/clusters/run_clusters.html", build, state=state
    )


@require_POST
def run_cluster_save(request: AuthedRequest, run_id: int) -> HttpResponse:
    """Save a cluster's items as a new dataset, or a new version of one."""
    run = run_get(user=request.user, run_id=run_id)
    try:
        dataset = dataset_create_from_cluster(
            run=run,
            user=request.user,
            key=request.POST.get("cluster", ""),
            name=request.POST.get("name", ""),
        )
    except (InvalidInput, Conflict) as exc:
        messages.error(request, f"The cluster could not be saved: {exc}")
        back = redirect("runs:run_clusters", run_id=run.pk)
        if is_content_key(request.POST.get("cluster", "")):
            back["Location"] += "?by=content"
        return back
    messages.success(
        request,
        f"Saved {dataset.item_count} items as {dataset.name} v{dataset.version}.",
    )
    return redirect("runs:dataset_detail", dataset_id=dataset.pk)

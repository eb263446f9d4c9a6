"""The clusters page of a run, and saving a cluster as a dataset."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from runs.access import Action, can
from runs.analysis.cluster_keys import is_content_key
from runs.analysis.clusters import run_clusters_cached
from runs.analysis.content_clusters import run_content_clusters
from runs.analysis.step_clusters import run_failing_steps
from runs.clusters.services import dataset_create_from_cluster
from runs.compare.selectors import run_compare_choices
from runs.datasets.selectors import dataset_names
from runs.errors import Conflict, InvalidInput
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
    run = run_get(user=request.user, run_id=run_id)
    baseline_id = query_id(request.GET.get("baseline"))
    baseline = run_get(user=request.user, run_id=baseline_id) if baseline_id else None
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
    return render(request, "runs/clusters/run_clusters.html", context)


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

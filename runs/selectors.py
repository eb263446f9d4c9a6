"""Reads, always scoped to the projects the user belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.utils import timezone

from runs.access import visible_projects
from runs.errors import NotFound
from runs.models import Dataset, Item, Result, Run, Target

User = AbstractBaseUser | AnonymousUser
THROUGHPUT_WINDOW_SECONDS = 30


def run_list(*, user: User, project_id: int | None = None) -> QuerySet[Run]:
    runs = Run.objects.filter(project__in=visible_projects(user)).select_related(
        "project", "dataset"
    )
    if project_id is not None:
        runs = runs.filter(project_id=project_id)
    return runs


def run_get(*, user: User, run_id: int) -> Run:
    try:
        return run_list(user=user).get(pk=run_id)
    except Run.DoesNotExist:
        raise NotFound(f"no run {run_id}") from None


def dataset_list(*, user: User, project_id: int | None = None) -> QuerySet[Dataset]:
    datasets = Dataset.objects.filter(
        project__in=visible_projects(user)
    ).select_related("project")
    if project_id is not None:
        datasets = datasets.filter(project_id=project_id)
    return datasets


def dataset_get(*, user: User, dataset_id: int) -> Dataset:
    try:
        return dataset_list(user=user).get(pk=dataset_id)
    except Dataset.DoesNotExist:
        raise NotFound(f"no dataset {dataset_id}") from None


def dataset_items(*, dataset: Dataset) -> QuerySet[Item]:
    return Item.objects.filter(dataset=dataset).order_by("index")


def target_list(*, user: User, project_id: int | None = None) -> QuerySet[Target]:
    targets = Target.objects.filter(project__in=visible_projects(user)).select_related(
        "project"
    )
    if project_id is not None:
        targets = targets.filter(project_id=project_id)
    return targets


def target_get(*, user: User, target_id: int) -> Target:
    try:
        return target_list(user=user).get(pk=target_id)
    except Target.DoesNotExist:
        raise NotFound(f"no target {target_id}") from None


def result_list(*, run: Run, status: str | None = None) -> QuerySet[Result]:
    """A run's results in dataset order, optionally of one status."""
    results = (
        Result.objects.filter(run=run)
        .select_related("item")
        .prefetch_related("scores")
        .order_by("item_index", "epoch")
    )
    if status:
        results = results.filter(status=status)
    return results


def result_get(*, user: User, run_id: int, result_id: int) -> Result:
    run = run_get(user=user, run_id=run_id)
    try:
        return result_list(run=run).get(pk=result_id)
    except Result.DoesNotExist:
        raise NotFound(f"no result {result_id} in run {run_id}") from None


@dataclass(frozen=True, slots=True)
class RunProgress:
    run: Run
    processed: int
    total: int
    percent: float
    throughput: float | None  # items per second over the recent window
    eta_seconds: float | None
    alive: bool  # an executor has beaten recently


def run_progress(*, run: Run) -> RunProgress:
    """Progress figures from the stored counts; throughput over the last 30 s."""
    now = timezone.now()
    processed = run.processed
    total = run.total
    throughput = eta = None
    if run.started_at is not None:
        window_start = max(
            run.started_at, now - timedelta(seconds=THROUGHPUT_WINDOW_SECONDS)
        )
        end = run.finished_at or now
        seconds = (end - window_start).total_seconds()
        if run.is_final:
            elapsed = (end - run.started_at).total_seconds()
            throughput = processed / elapsed if elapsed > 0 else None
        elif seconds > 0.5:
            recent = Result.objects.filter(
                run=run, finished_at__gte=window_start
            ).count()
            throughput = recent / seconds
        if not run.is_final and throughput:
            eta = max(total - processed, 0) / throughput
    alive = bool(
        run.heartbeat_at
        and (now - run.heartbeat_at).total_seconds() < 15
        and not run.is_final
    )
    return RunProgress(
        run=run,
        processed=processed,
        total=total,
        percent=round(100 * processed / total, 1) if total else 100.0,
        throughput=throughput,
        eta_seconds=eta,
        alive=alive,
    )

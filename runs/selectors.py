"""Reads, always scoped to the projects the user belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Avg, Count, Q, QuerySet
from django.utils import timezone

from runs.access import editable_projects, role_of, visible_projects
from runs.errors import NotFound
from runs.models import (
    Dataset,
    Item,
    Membership,
    Project,
    Result,
    Run,
    Score,
    Target,
)

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
        return run_list(user=user).select_related("created_by").get(pk=run_id)
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
    alive = run.alive
    return RunProgress(
        run=run,
        processed=processed,
        total=total,
        percent=round(100 * processed / total, 1) if total else 100.0,
        throughput=throughput,
        eta_seconds=eta,
        alive=alive,
    )


# -- pages and live progress ---------------------------------------------------

LIVE_ROWS_LIMIT = 50


def project_get(*, user: User, project_id: int) -> Project:
    try:
        return visible_projects(user).get(pk=project_id)
    except Project.DoesNotExist:
        raise NotFound(f"no project {project_id}") from None


def run_search(
    *, user: User, project_id: int | None = None, status: str | None = None
) -> QuerySet[Run]:
    """The runs list of the dashboard, newest first, optionally filtered."""
    runs = run_list(user=user, project_id=project_id)
    if status:
        runs = runs.filter(status=status)
    return runs.order_by("-created_at", "-id")


def dataset_versions(*, dataset: Dataset) -> QuerySet[Dataset]:
    """All versions of the dataset's name in its project, newest first."""
    return Dataset.objects.filter(
        project_id=dataset.project_id, name=dataset.name
    ).order_by("-version")


@dataclass(frozen=True, slots=True)
class ScorerSummary:
    scorer: str
    mean: float | None
    scored: int
    passed: int
    errors: int


def run_scorer_summaries(*, run: Run) -> list[ScorerSummary]:
    """Mean value, passes and errors per scorer, in the run's scorer order."""
    rows = {
        row["scorer"]: row
        for row in Score.objects.filter(result__run=run)
        .values("scorer")
        .annotate(
            mean=Avg("value"),
            scored=Count("id", filter=Q(value__isnull=False)),
            passed=Count("id", filter=Q(passed=True)),
            errors=Count("id", filter=~Q(error="")),
        )
    }
    names = [spec.get("name") or spec.get("kind") for spec in run.scorers]
    names += sorted(set(rows) - set(names))
    return [
        ScorerSummary(
            scorer=name,
            mean=rows.get(name, {}).get("mean"),
            scored=rows.get(name, {}).get("scored", 0),
            passed=rows.get(name, {}).get("passed", 0),
            errors=rows.get(name, {}).get("errors", 0),
        )
        for name in names
    ]


@dataclass(frozen=True, slots=True)
class RunOverview:
    run: Run
    progress: RunProgress
    scorers: list[ScorerSummary]
    can_edit: bool


def run_overview(*, user: User, run_id: int) -> RunOverview:
    """A run with its progress, scorer means and whether the user may change it."""
    run = run_get(user=user, run_id=run_id)
    role = role_of(user, run.project)
    return RunOverview(
        run=run,
        progress=run_progress(run=run),
        scorers=run_scorer_summaries(run=run),
        can_edit=role in (Membership.Role.EDITOR, Membership.Role.ADMIN),
    )


def result_latest(
    *, run: Run, after_id: int = 0, limit: int = LIVE_ROWS_LIMIT
) -> list[Result]:
    """The latest stored results, newest first, only those after ``after_id``."""
    return list(
        Result.objects.filter(run=run, pk__gt=after_id)
        .select_related("item")
        .prefetch_related("scores")
        .order_by("-pk")[:limit]
    )


def run_demo_choice(*, user: User) -> tuple[Dataset, Target] | None:
    """A demo target the user may run, with a dataset of its project it can answer.

    The demo model solves arithmetic, so an arithmetic dataset is preferred
    (the largest, to have something to watch), else the newest dataset.
    """
    target = (
        target_list(user=user)
        .filter(kind="demo", project__in=editable_projects(user))
        .order_by("created_at", "pk")
        .first()
    )
    if target is None:
        return None
    datasets = dataset_list(user=user, project_id=target.project_id)
    dataset = (
        datasets.filter(name__icontains="arith")
        .order_by("-item_count", "-version")
        .first()
    ) or datasets.order_by("-created_at", "-version").first()
    return (dataset, target) if dataset is not None else None

"""The evaluation endpoints: create, list, read, change, delete, schedules,
history, and the trigger that starts a run."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from ninja import Query, Router, Status

from runs.compare.selectors import compare_url
from runs.datasets.selectors import dataset_get
from runs.evaluations import schedules as schedule_services
from runs.evaluations.schemas import (
    ChangeOut,
    EvaluationFilter,
    EvaluationIn,
    EvaluationOut,
    EvaluationPatch,
    ScheduleIn,
    ScheduleOut,
    TriggerIn,
    TriggerOut,
)
from runs.evaluations.selectors import evaluation_get, evaluation_list, schedule_get
from runs.evaluations.services import (
    Trigger,
    evaluation_baseline,
    evaluation_create,
    evaluation_delete,
    evaluation_run,
    evaluation_update,
)
from runs.models import Evaluation, EvaluationChange, Run, Schedule
from runs.projects.selectors import project_get
from runs.results.selectors import run_get
from runs.targets.selectors import target_get
from runs.web.api import ERRORS, READ_ERRORS, paginated
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

evaluation_router = Router(tags=["evaluations"])


def _references(request: ApiRequest, payload: Any) -> dict[str, Any]:
    """The payload's fields, ids read as the rows the user may see."""
    data = payload.model_dump(exclude_unset=True, exclude={"project", "scorers"})
    user = request.auth
    if data.get("dataset") is not None:
        data["dataset"] = dataset_get(user=user, dataset_id=data["dataset"])
    if data.get("target") is not None:
        data["target"] = target_get(user=user, target_id=data["target"])
    if data.get("baseline_run") is not None:
        data["baseline_run"] = run_get(user=user, run_id=data["baseline_run"])
    scorers = payload.scorer_specs()
    if scorers is not None:
        data["scorers"] = scorers
    return {key: value for key, value in data.items() if value is not None}


@evaluation_router.post("", response={201: EvaluationOut, **ERRORS})
def create_evaluation(request: ApiRequest, payload: EvaluationIn) -> Status[Evaluation]:
    """Save an evaluation: a dataset, a target, scorers, options, a baseline."""
    project = project_get(user=request.auth, project_id=payload.project)
    evaluation = evaluation_create(
        user=request.auth, project=project, **_references(request, payload)
    )
    return Status(201, evaluation)


@evaluation_router.get("", response={200: list[EvaluationOut], **READ_ERRORS})
@paginated
def list_evaluations(
    request: ApiRequest, filters: Query[EvaluationFilter]
) -> QuerySet[Evaluation]:
    return filters.filter(evaluation_list(user=request.auth))


@evaluation_router.get("/{evaluation_id}", response={200: EvaluationOut, **READ_ERRORS})
def get_evaluation(request: ApiRequest, evaluation_id: DbId) -> Evaluation:
    return evaluation_get(user=request.auth, evaluation_id=evaluation_id)


@evaluation_router.patch("/{evaluation_id}", response={200: EvaluationOut, **ERRORS})
def update_evaluation(
    request: ApiRequest, evaluation_id: DbId, payload: EvaluationPatch
) -> Evaluation:
    """Change some fields; the history records who changed what."""
    evaluation = evaluation_get(user=request.auth, evaluation_id=evaluation_id)
    changes = _references(request, payload)
    return evaluation_update(evaluation=evaluation, user=request.auth, **changes)


@evaluation_router.delete("/{evaluation_id}", response={204: None, **ERRORS})
def delete_evaluation(request: ApiRequest, evaluation_id: DbId) -> Status[None]:
    """Delete an evaluation and its schedules; its runs stay."""
    evaluation = evaluation_get(user=request.auth, evaluation_id=evaluation_id)
    evaluation_delete(evaluation=evaluation, user=request.auth)
    return Status(204, None)


@evaluation_router.get(
    "/{evaluation_id}/history", response={200: list[ChangeOut], **READ_ERRORS}
)
@paginated
def evaluation_history(
    request: ApiRequest, evaluation_id: DbId
) -> QuerySet[EvaluationChange]:
    """Who changed the evaluation, when, and each field before and after."""
    evaluation = evaluation_get(user=request.auth, evaluation_id=evaluation_id)
    return evaluation.changes.select_related("user")


@evaluation_router.post(
    "/{evaluation_id}/schedules", response={201: ScheduleOut, **ERRORS}
)
def add_schedule(
    request: ApiRequest, evaluation_id: DbId, payload: ScheduleIn
) -> Status[Schedule]:
    """Run the evaluation on a cron expression read in a time zone."""
    evaluation = evaluation_get(user=request.auth, evaluation_id=evaluation_id)
    schedule = schedule_services.schedule_add(
        evaluation=evaluation,
        user=request.auth,
        cron=payload.cron,
        timezone_name=payload.timezone,
    )
    return Status(201, schedule)


@evaluation_router.delete(
    "/{evaluation_id}/schedules/{schedule_id}", response={204: None, **ERRORS}
)
def remove_schedule(
    request: ApiRequest, evaluation_id: DbId, schedule_id: DbId
) -> Status[None]:
    evaluation = evaluation_get(user=request.auth, evaluation_id=evaluation_id)
    schedule = schedule_get(evaluation=evaluation, schedule_id=schedule_id)
    schedule_services.schedule_remove(schedule=schedule, user=request.auth)
    return Status(204, None)


@evaluation_router.post("/{evaluation_id}/runs", response={201: TriggerOut, **ERRORS})
def trigger_evaluation(
    request: ApiRequest, evaluation_id: DbId, payload: TriggerIn
) -> Status[dict[str, Any]]:
    """Start a run of the evaluation, optionally against another target or
    configuration (a candidate); answers the run and its baseline."""
    evaluation = evaluation_get(user=request.auth, evaluation_id=evaluation_id)
    target = None
    if payload.target is not None:
        target = target_get(user=request.auth, target_id=payload.target)
    run = evaluation_run(
        evaluation=evaluation,
        user=request.auth,
        trigger=Trigger.API,
        target=target,
        **payload.model_dump(exclude={"target"}),
    )
    return Status(201, _trigger_answer(request, evaluation, run))


def _trigger_answer(
    request: ApiRequest, evaluation: Evaluation, run: Run
) -> dict[str, Any]:
    baseline = evaluation_baseline(evaluation, run)
    compare = None
    if baseline is not None:
        compare = request.build_absolute_uri(compare_url(baseline.pk, [run.pk]))
    return {
        "run": run.pk,
        "status": run.status,
        "evaluation": evaluation.pk,
        "baseline": baseline.pk if baseline is not None else None,
        "url": request.build_absolute_uri(reverse("runs:run_detail", args=[run.pk])),
        "api_url": request.build_absolute_uri(f"/api/v1/runs/{run.pk}"),
        "compare_url": compare,
    }

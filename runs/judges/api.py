"""The endpoint that measures a run's LLM judges against people."""

from __future__ import annotations

from typing import Any

from ninja import Router

from runs.judges.schemas import (
    JudgeAgreementOut,
    JudgeThresholdsIn,
    JudgeThresholdsOut,
)
from runs.judges.selectors import run_judge_agreement_get
from runs.judges.services import judge_thresholds_set
from runs.models import Project
from runs.projects.selectors import project_get
from runs.web.api import ERRORS, READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

judge_router = Router(tags=["runs"])
judge_settings_router = Router(tags=["projects"])


@judge_router.get(
    "/{run_id}/judge-agreement", response={200: JudgeAgreementOut, **READ_ERRORS}
)
def judge_agreement(request: ApiRequest, run_id: DbId) -> dict[str, Any]:
    """Each llm_judge scorer of the run against each human scorer
    (``human:<queue>``, a review queue's consensus) over the results both
    judged: Cohen's kappa with its bootstrap interval, the confusion matrix
    (failure the positive class), precision and recall of the judge's
    failures, whether it is stricter or laxer than people, and whether it is
    calibrated (kappa at least the project's ``judge_kappa_threshold`` over at
    least its ``judge_min_items`` results)."""
    return run_judge_agreement_get(user=request.auth, run_id=run_id)


@judge_settings_router.get(
    "/{project_id}/judge-calibration",
    response={200: JudgeThresholdsOut, **READ_ERRORS},
)
def get_judge_thresholds(request: ApiRequest, project_id: DbId) -> Project:
    """When the project's LLM judges count as calibrated against people."""
    return project_get(user=request.auth, project_id=project_id)


@judge_settings_router.patch(
    "/{project_id}/judge-calibration", response={200: JudgeThresholdsOut, **ERRORS}
)
def set_judge_thresholds(
    request: ApiRequest, project_id: DbId, payload: JudgeThresholdsIn
) -> Project:
    """Set ``judge_kappa_threshold`` and ``judge_min_items``; project admins only."""
    project = project_get(user=request.auth, project_id=project_id)
    return judge_thresholds_set(
        project=project,
        user=request.auth,
        kappa_threshold=payload.judge_kappa_threshold,
        min_items=payload.judge_min_items,
    )

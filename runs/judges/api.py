"""The endpoint that measures a run's LLM judges against people."""

from __future__ import annotations

from typing import Any

from ninja import Router

from runs.judges.schemas import JudgeAgreementOut
from runs.judges.selectors import run_judge_agreement_get
from runs.web.api import READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

judge_router = Router(tags=["runs"])


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

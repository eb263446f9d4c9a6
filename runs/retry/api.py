"""The retry and resume endpoints."""

from __future__ import annotations

from typing import Any

from ninja import Router

from runs.results.selectors import run_get
from runs.retry.resume import run_resume
from runs.retry.schemas import ResumeIn, ResumeOut, RetryIn, RetryOut
from runs.retry.services import run_retry
from runs.web.api import ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

retry_router = Router(tags=["runs"])


@retry_router.post("/{run_id}/retry", response={200: RetryOut, **ERRORS})
def retry_run(request: ApiRequest, run_id: DbId, payload: RetryIn) -> dict[str, Any]:
    """Run the chosen results of an ended run again, in the same run.

    Each chosen result is rewritten in place, its new attempts appended to its
    attempt log; items with no result run too. 409 while the run executes.
    """
    run = run_get(user=request.auth, run_id=run_id)
    plan = run_retry(
        run=run,
        user=request.auth,
        statuses=payload.statuses,
        cluster=payload.cluster,
        dry_run=payload.dry_run,
    )
    return {
        "items": plan.items,
        "results": plan.results,
        "rewrites": plan.rewrites,
        "missing": plan.missing,
        "calls": plan.calls,
        "statuses": list(plan.statuses),
        "cluster": plan.cluster,
        "launched": plan.launched,
        "run": plan.run,
    }


@retry_router.post("/{run_id}/resume", response={200: ResumeOut, **ERRORS})
def resume_run(request: ApiRequest, run_id: DbId, payload: ResumeIn) -> dict[str, Any]:
    """Run the items of the run that have no result, in the same run.

    For a run stopped by its cost budget: give a higher ``cost_budget`` in
    ``options`` (the only option that may change). 409 while the run executes
    or when every item has a result.
    """
    run = run_get(user=request.auth, run_id=run_id)
    resumed = run_resume(run=run, user=request.auth, options=payload.options)
    return {"run": resumed, "launched": True}

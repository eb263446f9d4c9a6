"""The re-scoring endpoints: start a re-score, list a run's scoring passes."""

from __future__ import annotations

from typing import Any

from ninja import Router

from runs.rescore.schemas import RescoreIn, RescoreOut, ScoringPassOut
from runs.rescore.selectors import scoring_passes
from runs.rescore.services import run_rescore
from runs.results.selectors import run_get
from runs.web.api import ERRORS, READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

rescore_router = Router(tags=["runs"])


@rescore_router.post("/{run_id}/rescore", response={200: RescoreOut, **ERRORS})
def rescore_run(
    request: ApiRequest, run_id: DbId, payload: RescoreIn
) -> dict[str, Any]:
    """Score an ended run's stored outputs again, without calling its target.

    Scores are added or replaced by scorer name (the other scorers' stay) and
    the run's scorer list is updated; the pass runs in the background and is
    listed at ``/runs/{id}/scoring-passes``. 409 while the run executes or
    is being re-scored.
    """
    run = run_get(user=request.auth, run_id=run_id)
    plan = run_rescore(
        run=run,
        user=request.auth,
        scorers=payload.scorer_specs(),
        dry_run=payload.dry_run,
    )
    return {
        "results": plan.results,
        "added": plan.added,
        "replaced": plan.replaced,
        "kind_changes": {k: list(v) for k, v in plan.kind_changes.items()},
        "launched": plan.launched,
        "scoring_pass": plan.scoring_pass,
        "run": plan.run,
    }


@rescore_router.get(
    "/{run_id}/scoring-passes", response={200: list[ScoringPassOut], **READ_ERRORS}
)
def list_scoring_passes(request: ApiRequest, run_id: DbId) -> list[Any]:
    """The run's scoring passes, oldest first: its own execution, then each
    re-score with who started it, when, its scorers and parameters, and counts."""
    run = run_get(user=request.auth, run_id=run_id)
    return scoring_passes(run=run)

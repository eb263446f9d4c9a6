"""``POST /runs/estimate``: what a run would cost before it starts."""

from __future__ import annotations

from typing import Any

from ninja import Router, Status

from runs.datasets.selectors import dataset_get
from runs.estimates.schemas import EstimateIn, EstimateOut
from runs.estimates.services import estimate_sample, run_estimate
from runs.targets.selectors import target_get
from runs.web.api import ERRORS
from runs.web.requests import ApiRequest

estimate_router = Router(tags=["runs"])


@estimate_router.post(
    "/estimate", response={200: EstimateOut, 202: EstimateOut, **ERRORS}
)
def estimate_run(request: ApiRequest, payload: EstimateIn) -> Status[dict[str, Any]]:
    """What a run of these would cost: tokens per item from the last runs of
    the target over the dataset, priced now, judges included, times items and
    epochs. With ``sample``, first send that many items for real (charged)."""
    dataset = dataset_get(user=request.auth, dataset_id=payload.dataset)
    target = None
    if payload.target is not None:
        target = target_get(user=request.auth, target_id=payload.target)
    arguments: dict[str, Any] = {
        "user": request.auth,
        "dataset": dataset,
        "target": target,
        "target_kind": payload.target_kind,
        "target_config": payload.target_config,
        "scorers": payload.scorer_specs(),
        "options": payload.options,
    }
    sample = None
    if payload.sample is not None:
        sample = estimate_sample(items=payload.sample, **arguments)
    found = run_estimate(**arguments).as_dict()
    if sample is None:
        return Status(200, found)
    return Status(202, found | {"sample_run": sample.pk})

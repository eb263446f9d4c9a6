"""Estimates asked for (the API, the new-run form) and paid samples."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, Unpack

from django.contrib.auth.models import User

from runs.access import Action, require
from runs.errors import InvalidInput
from runs.executor.options import RunOptions
from runs.models import Dataset, Run, Target
from runs.results.cost_estimate import Estimate, estimate
from runs.results.services import run_create, target_clean
from runs.scorers import clean_scorer_specs

SAMPLE_MAX = 20


class RunSpec(TypedDict):
    """What a run is of, as ``run_create`` takes it."""

    target: NotRequired[Target | None]
    target_kind: NotRequired[str | None]
    target_config: NotRequired[dict[str, Any] | None]
    scorers: list[Any]
    options: NotRequired[dict[str, Any] | RunOptions | None]


def _arguments(*, dataset: Dataset, spec: RunSpec) -> dict[str, Any]:
    """What ``run_create`` would freeze, cleaned the same way."""
    target = spec.get("target")
    target_kind, config = target_clean(
        dataset=dataset,
        target=target,
        target_kind=spec.get("target_kind"),
        target_config=spec.get("target_config"),
    )
    options = spec.get("options")
    if not isinstance(options, RunOptions):
        options = RunOptions.from_dict(options, path="options")
    return {
        "dataset": dataset,
        "target": target,
        "target_kind": target_kind,
        "target_config": config,
        "scorers": clean_scorer_specs(spec["scorers"], path="scorers"),
        "options": options,
    }


def run_estimate(*, user: User, dataset: Dataset, **spec: Unpack[RunSpec]) -> Estimate:
    """What a run would cost (a member of the dataset's project may ask)."""
    require(user, dataset.project, Action.VIEW)
    return estimate(**_arguments(dataset=dataset, spec=spec))


def estimate_sample(
    *, user: User, dataset: Dataset, items: int, **spec: Unpack[RunSpec]
) -> Run:
    """Send the first ``items`` items through the target for real (editors).

    A run of its own limited to those items, named for what it is, charged
    as any run is; one epoch, its judges included. Once it ends, estimates
    read it as a past run.
    """
    require(user, dataset.project, Action.EDIT)
    if not 1 <= items <= min(SAMPLE_MAX, dataset.item_count):
        most = min(SAMPLE_MAX, dataset.item_count)
        raise InvalidInput(f"must be from 1 to {most}", field="sample")
    arguments = _arguments(dataset=dataset, spec=spec)
    sample_options = RunOptions.from_dict(
        arguments["options"].to_dict() | {"epochs": 1}, path="options"
    )
    return run_create(
        user=user,
        dataset=dataset,
        target=arguments["target"],
        target_kind=arguments["target_kind"],
        target_config=arguments["target_config"],
        scorers=arguments["scorers"],
        options=sample_options,
        name=f"Cost sample: {items} item{'s' * (items != 1)}",
        # Launched as any run is (in the distributed mode, by a worker); its
        # first items alone, however often it is executed (a resume, a retry).
        item_limit=items,
    )

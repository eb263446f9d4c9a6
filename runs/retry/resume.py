"""Resuming a run, with a new cost budget if need be."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from runs.access import Action, require
from runs.calls.pricing import usd
from runs.errors import Conflict, InvalidInput
from runs.executor.options import RunOptions
from runs.models import Result, Run
from runs.results.selectors import SKIPPED
from runs.results.services import run_launch
from runs.retry.services import run_retry

# What may change when a run resumes: a spending limit, not how items run
# (results before and after must stay comparable).
RESUME_OPTIONS = ("cost_budget",)


def run_resume(
    *,
    run: Run,
    user: User | None,
    options: dict[str, Any] | None = None,
    launch: bool = True,
) -> Run:
    """Run the items of a run that have no result, with changed ``options``.

    A run that ended with items never started (its cost budget reached, a
    cancel, a deadline) runs them inside the same run, as a retry of its
    skipped items does; a run that has not ended only takes the new options.
    Only ``cost_budget`` may change; a budget the run has already spent is
    refused. ``launch=False`` leaves the execution to the caller.
    """
    if user is not None:
        require(user, run.project, Action.EDIT)
    changes = dict(options or {})
    for key in changes:
        if key not in RESUME_OPTIONS:
            raise InvalidInput(
                "cannot change when a run resumes (only cost_budget can)",
                field=f"options.{key}",
            )
    with transaction.atomic():
        locked = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
        merged = RunOptions.from_dict({**locked.options, **changes}, path="options")
        budget = merged.cost_budget
        if changes and budget is not None and budget <= locked.cost:
            raise InvalidInput(
                f"the run has already cost {usd(locked.cost)}: give a higher "
                "budget, or none",
                field="options.cost_budget",
            )
        if not locked.is_final and locked.alive:
            raise Conflict(f"run {run.pk} is executing: cancel it first, or let it end")
        if locked.is_final and not _has_skipped(locked):
            raise Conflict(
                f"run {run.pk} has a result for every item: nothing to resume "
                "(retry its results instead)"
            )
        Run.objects.filter(pk=run.pk).update(options=merged.to_dict())
        if locked.is_final:
            run_retry(run=locked, user=None, statuses=[SKIPPED], launch=False)
    if launch:
        transaction.on_commit(lambda: run_launch(run=locked))
    return Run.objects.get(pk=run.pk)


def _has_skipped(run: Run) -> bool:
    return Result.objects.filter(run=run).count() < run.total

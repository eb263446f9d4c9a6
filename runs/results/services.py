"""Writes to runs: create one (its scorers and secrets checked), launch, cancel."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from runs import events
from runs.access import Action, require
from runs.errors import InvalidInput
from runs.executor import endings
from runs.executor.launchers import get_launcher
from runs.executor.options import RunOptions
from runs.executor.store import retries_release, run_recount
from runs.models import (
    Dataset,
    Run,
    RunStatus,
    Target,
)
from runs.records.names import clean_name
from runs.records.retries import retry_pass_end
from runs.results.cost_estimate import estimate_record
from runs.scorers import REGISTRY as SCORERS
from runs.scorers import clean_scorer_specs
from runs.secrets.store import (
    check_scorer_secrets,
    check_target_secrets,
)
from runs.targets import clean_target_config
from runs.targets.base import get_target_class


def run_create(
    *,
    user: User | None,
    dataset: Dataset,
    target: Target | None = None,
    target_kind: str | None = None,
    target_config: dict[str, Any] | None = None,
    scorers: list[Any],
    options: dict[str, Any] | RunOptions | None = None,
    name: str = "",
    parent: Run | None = None,
    launch: bool = True,
    item_limit: int | None = None,
) -> Run:
    """Create a run with a frozen copy of its configuration, and launch it.

    ``item_limit`` runs only the dataset's first that many items, wherever
    and however often the run is executed.
    """
    project = dataset.project
    if user is not None:
        require(user, project, Action.EDIT)
    name = clean_name(name, model=Run, required=False)
    target_kind, config = target_clean(
        dataset=dataset,
        target=target,
        target_kind=target_kind,
        target_config=target_config,
    )
    check_target_secrets(
        project=project, kind=target_kind, config=config, path="target_config"
    )
    # A kind that builds on the project's data (chain: another run) checks it
    # here and freezes what it refers to; the run it builds on is its parent.
    config, source = get_target_class(target_kind).prepare_for_run(
        config, project=project, dataset=dataset, path="target_config"
    )
    parent = parent or source
    scorer_specs = clean_scorer_specs(scorers, path="scorers")
    if not scorer_specs:
        raise InvalidInput("choose at least one scorer", field="scorers")
    require_expected_answers(dataset, scorer_specs)
    check_scorer_secrets(project=project, specs=scorer_specs)
    if not isinstance(options, RunOptions):
        options = RunOptions.from_dict(options, path="options")
    if item_limit is not None and not 1 <= item_limit <= dataset.item_count:
        raise InvalidInput(
            f"must be from 1 to {dataset.item_count}, the dataset's items",
            field="item_limit",
        )
    items = dataset.item_count if item_limit is None else item_limit
    run = Run.objects.create(
        project=project,
        name=name,
        dataset=dataset,
        dataset_hash=dataset.content_hash,
        target=target,
        target_name=target.name if target else target_kind,
        target_kind=target_kind,
        target_config=config,
        scorers=scorer_specs,
        options=options.to_dict(),
        total=items * options.epochs,
        item_limit=item_limit,
        parent=parent,
        created_by=user,
    )
    estimate_record(run)
    if launch:
        transaction.on_commit(lambda: run_launch(run=run))
    return run


def target_clean(
    *,
    dataset: Dataset,
    target: Target | None,
    target_kind: str | None,
    target_config: dict[str, Any] | None,
) -> tuple[str, dict[str, Any]]:
    """The kind and checked configuration of a run's target: a saved target
    of the dataset's project, else a kind and configuration given inline."""
    if target is not None:
        if target.project_id != dataset.project_id:
            raise InvalidInput(
                "belongs to another project than the dataset", field="target"
            )
        target_kind, target_config = target.kind, target.config
    if not target_kind:
        raise InvalidInput("is required", field="target")
    config = clean_target_config(
        target_kind, target_config or {}, path="target_config", kind_field="target"
    )
    return target_kind, config


def require_expected_answers(dataset: Dataset, specs: list[dict[str, Any]]) -> None:
    """Refuse scorers that compare with an expected answer the dataset lacks.

    Without this, every item would score 0 and the run would look completed.
    """
    needing = [
        spec["name"]
        for spec in specs
        if SCORERS[spec["kind"]].requires_expected(spec["params"])
    ]
    if not needing or dataset.item_count == 0 or dataset.expected_count > 0:
        return
    names = ", ".join(needing)
    raise InvalidInput(
        f"{names} compare{'s' if len(needing) == 1 else ''} outputs with the "
        f"expected answer, and dataset {dataset.name!r} v{dataset.version} has "
        "none; import it again naming its answer field, or choose a scorer "
        "that needs no expected answer",
        field="scorers",
    )


def run_launch(*, run: Run) -> None:
    get_launcher().launch(run.pk)


def run_cancel(*, run: Run, user: User | None = None) -> Run:
    """Ask a run to stop; harmless when repeated or when the run has ended.

    A pending run that no executor has claimed ends at once; a running one is
    stopped by its executor, in whatever process, within a second.
    """
    if user is not None:
        require(user, run.project, Action.EDIT)
    if run.is_final:
        return run
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    with transaction.atomic():
        now = timezone.now()
        unclaimed = Run.objects.filter(
            pk=run.pk, status=RunStatus.PENDING, heartbeat_at__isnull=True
        ).update(status=RunStatus.CANCELLED, finished_at=now)
        if unclaimed:
            # A retry pass no executor started ends; the run keeps its end.
            kept = retry_pass_end(run.pk, RunStatus.CANCELLED, now)
            if kept is not None:
                Run.objects.filter(pk=run.pk).update(finished_at=kept)
        if unclaimed and retries_release(run.pk):
            # A retry no executor started: its results keep their outcome.
            released = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
            run_recount(released)
            released.save()
    get_launcher().cancel(run.pk)
    run.refresh_from_db()
    if unclaimed:
        events.publish_run_update_sync(run.pk, final=True)
        endings.run_ended_tell(run.pk)
    return run

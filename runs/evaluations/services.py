"""Writes to saved evaluations: create, change (with its history), delete, run
one, and what the end of a run it made does."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from runs.access import Action, require
from runs.alerts.services import announce_later, clean_channels
from runs.errors import Conflict, InvalidInput
from runs.estimates.services import estimate_sample
from runs.executor.options import RunOptions
from runs.models import (
    FINAL_RUN_STATUSES,
    AlertChannel,
    Dataset,
    Evaluation,
    EvaluationChange,
    Project,
    Run,
    RunStatus,
    Schedule,
    Target,
)
from runs.records.names import clean_name
from runs.results.services import require_expected_answers, run_create, run_launch
from runs.scorers import clean_scorer_specs
from runs.secrets.store import check_scorer_secrets, check_target_secrets
from runs.targets import clean_target_config

# What an evaluation holds that a person sets, in the order its history shows.
FIELDS = (
    "name",
    "description",
    "dataset",
    "dataset_policy",
    "target",
    "target_kind",
    "target_config",
    "scorers",
    "options",
    "baseline_policy",
    "baseline_run",
    "pass_rate_floors",
    "channels",
)
# Statuses a baseline may have: a run that ended with results to compare.
BASELINE_STATUSES = (RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS)


class Trigger:
    MANUAL = "manual"
    SCHEDULE = "schedule"
    API = "api"


def _choice(value: str, choices: Any, field: str) -> str:
    if value not in choices.values:
        allowed = ", ".join(choices.values)
        raise InvalidInput(f"must be one of {allowed}, not {value!r}", field=field)
    return value


def _floors(floors: Any, scorer_names: list[str]) -> dict[str, float]:
    if not isinstance(floors, dict):
        raise InvalidInput(
            "must be an object: scorer -> pass rate", field="pass_rate_floors"
        )
    cleaned: dict[str, float] = {}
    for scorer, floor in floors.items():
        field = f"pass_rate_floors.{scorer}"
        if scorer not in scorer_names:
            names = ", ".join(scorer_names)
            raise InvalidInput(
                f"is not a scorer of the evaluation ({names})", field=field
            )
        if isinstance(floor, bool) or not isinstance(floor, int | float):
            raise InvalidInput("must be a number from 0 to 1", field=field)
        if not 0.0 <= float(floor) <= 1.0:
            raise InvalidInput(f"must be from 0 to 1, not {floor}", field=field)
        cleaned[scorer] = float(floor)
    return cleaned


def _clean(project: Project, values: dict[str, Any]) -> dict[str, Any]:
    """An evaluation's fields checked as a run of it would be (InvalidInput
    naming the field), ready to store."""
    out = dict(values)
    out["name"] = clean_name(values["name"], model=Evaluation)
    out["description"] = (values.get("description") or "").strip()
    dataset: Dataset = values["dataset"]
    if dataset.project_id != project.pk:
        raise InvalidInput("belongs to another project", field="dataset")
    _choice(values["dataset_policy"], Evaluation.DatasetPolicy, "dataset_policy")
    target: Target | None = values.get("target")
    if target is not None:
        if target.project_id != project.pk:
            raise InvalidInput("belongs to another project", field="target")
        out["target_kind"], out["target_config"] = "", {}
    else:
        kind = values.get("target_kind") or ""
        if not kind:
            raise InvalidInput("is required: a stored target or a kind", field="target")
        config = clean_target_config(
            kind, values.get("target_config") or {}, path="target_config"
        )
        check_target_secrets(
            project=project, kind=kind, config=config, path="target_config"
        )
        out["target_config"] = config
    specs = clean_scorer_specs(values["scorers"], path="scorers")
    if not specs:
        raise InvalidInput("choose at least one scorer", field="scorers")
    require_expected_answers(dataset, specs)
    check_scorer_secrets(project=project, specs=specs)
    out["scorers"] = specs
    out["options"] = RunOptions.from_dict(values.get("options"), path="options")
    out["options"] = out["options"].to_dict()
    policy = _choice(
        values["baseline_policy"], Evaluation.BaselinePolicy, "baseline_policy"
    )
    baseline: Run | None = values.get("baseline_run")
    if policy != Evaluation.BaselinePolicy.FIXED:
        baseline = None
    elif baseline is None:
        raise InvalidInput("is required with a fixed baseline", field="baseline_run")
    elif baseline.project_id != project.pk:
        raise InvalidInput("belongs to another project", field="baseline_run")
    elif baseline.status not in BASELINE_STATUSES:
        raise InvalidInput("must be a run that has completed", field="baseline_run")
    out["baseline_run"] = baseline
    names = [spec["name"] for spec in specs]
    out["pass_rate_floors"] = _floors(values.get("pass_rate_floors") or {}, names)
    out["channels"] = _channels(project, values.get("channels"))
    return out


def _channels(project: Project, given: Any) -> list[AlertChannel]:
    """The alert channels of the project given (rows or ids), in order."""
    if given is None:
        return []
    if isinstance(given, str | bytes) or not isinstance(given, list | tuple):
        raise InvalidInput("must be a list of alert channel ids", field="channels")
    ids: list[int] = []
    for position, channel in enumerate(given):
        if isinstance(channel, AlertChannel):
            ids.append(channel.pk)
        elif isinstance(channel, int) and not isinstance(channel, bool):
            ids.append(channel)
        else:
            raise InvalidInput(
                "must be an alert channel id", field=f"channels[{position}]"
            )
    return clean_channels(project=project, channel_ids=ids, field="channels")


def _stored(value: Any) -> Any:
    """A field's value as the history keeps it (JSON)."""
    if isinstance(value, Dataset | Target | Run):
        return value.pk
    if isinstance(value, list) and all(isinstance(v, AlertChannel) for v in value):
        return sorted(channel.pk for channel in value)
    return value


def _current(evaluation: Evaluation, name: str) -> Any:
    """A field's stored value (a many-to-many field's rows as a list)."""
    if name == "channels":
        return list(evaluation.channels.all())
    return getattr(evaluation, name)


def evaluation_create(
    *,
    user: User,
    project: Project,
    name: str,
    dataset: Dataset,
    scorers: list[Any],
    dataset_policy: str = Evaluation.DatasetPolicy.FIXED,
    target: Target | None = None,
    target_kind: str | None = None,
    target_config: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    baseline_policy: str = Evaluation.BaselinePolicy.PREVIOUS,
    baseline_run: Run | None = None,
    pass_rate_floors: dict[str, Any] | None = None,
    channels: list[Any] | None = None,
    description: str = "",
) -> Evaluation:
    """Check and store an evaluation; its history begins with it."""
    require(user, project, Action.EDIT)
    given = {
        "name": name,
        "description": description,
        "dataset": dataset,
        "dataset_policy": dataset_policy,
        "target": target,
        "target_kind": target_kind,
        "target_config": target_config,
        "scorers": scorers,
        "options": options,
        "baseline_policy": baseline_policy,
        "baseline_run": baseline_run,
        "pass_rate_floors": pass_rate_floors,
        "channels": channels,
    }
    values = _clean(project, given)
    fields = {name: values[name] for name in FIELDS}
    columns = {name: value for name, value in fields.items() if name != "channels"}
    try:
        with transaction.atomic():
            evaluation = Evaluation.objects.create(
                project=project, created_by=user, updated_by=user, **columns
            )
            evaluation.channels.set(fields["channels"])
            EvaluationChange.objects.create(
                evaluation=evaluation,
                action=EvaluationChange.Action.CREATED,
                changes={name: [None, _stored(fields[name])] for name in FIELDS},
                user=user,
            )
    except IntegrityError:
        raise Conflict(f"an evaluation named {name!r} exists in {project}") from None
    return evaluation


def evaluation_update(
    *, evaluation: Evaluation, user: User, **given: Any
) -> Evaluation:
    """Change some fields (the others stay), checked as on creation; the
    history records who changed what from what."""
    require(user, evaluation.project, Action.EDIT)
    unknown = set(given) - set(FIELDS)
    if unknown:
        raise InvalidInput("cannot be changed", field=sorted(unknown)[0])
    before = {name: _current(evaluation, name) for name in FIELDS}
    values = _clean(evaluation.project, before | given)
    changes = {
        name: [_stored(before[name]), _stored(values[name])]
        for name in FIELDS
        if _stored(before[name]) != _stored(values[name])
    }
    if not changes:
        return evaluation
    for name in changes:
        if name != "channels":
            setattr(evaluation, name, values[name])
    evaluation.updated_by = user
    try:
        with transaction.atomic():
            evaluation.save()
            if "channels" in changes:
                evaluation.channels.set(values["channels"])
            EvaluationChange.objects.create(
                evaluation=evaluation,
                action=EvaluationChange.Action.UPDATED,
                changes=changes,
                user=user,
            )
    except IntegrityError:
        raise Conflict(
            f"an evaluation named {evaluation.name!r} exists in {evaluation.project}"
        ) from None
    return evaluation


def evaluation_delete(*, evaluation: Evaluation, user: User) -> None:
    """Delete an evaluation and its schedules; its runs stay, as plain runs."""
    require(user, evaluation.project, Action.EDIT)
    with transaction.atomic():
        evaluation.delete()


def evaluation_dataset(evaluation: Evaluation) -> Dataset:
    """The dataset version a run of it uses now: its own, or the latest of its
    name in the project."""
    if evaluation.dataset_policy == Evaluation.DatasetPolicy.LATEST:
        latest = (
            Dataset.objects.filter(
                project_id=evaluation.project_id, name=evaluation.dataset.name
            )
            .order_by("-version")
            .first()
        )
        if latest is not None:
            return latest
    return evaluation.dataset


def evaluation_baseline(evaluation: Evaluation, run: Run | None = None) -> Run | None:
    """The run ``run`` is compared with (or the next run would be): under its
    policy, the latest completed run of the evaluation before it, its fixed
    run, or none."""
    policy = evaluation.baseline_policy
    if policy == Evaluation.BaselinePolicy.FIXED:
        return evaluation.baseline_run
    if policy == Evaluation.BaselinePolicy.NONE:
        return None
    earlier = Run.objects.filter(evaluation=evaluation, status__in=BASELINE_STATUSES)
    if run is not None:
        earlier = earlier.filter(created_at__lte=run.created_at).exclude(pk=run.pk)
    return earlier.order_by("-created_at", "-pk").first()


def evaluation_run_going(evaluation: Evaluation) -> Run | None:
    """A run of the evaluation that has not ended, if any (the latest)."""
    going = Run.objects.filter(evaluation=evaluation).exclude(
        status__in=FINAL_RUN_STATUSES
    )
    return going.order_by("-created_at", "-pk").first()


def _target_arguments(
    evaluation: Evaluation,
    *,
    target: Target | None,
    target_kind: str | None,
    target_config: dict[str, Any] | None,
) -> dict[str, Any]:
    """The target a run of the evaluation uses: another stored target, another
    kind and configuration, the evaluation's with some configuration changed
    (a candidate model), or the evaluation's own."""
    if target is not None:
        return {"target": target}
    if target_kind:
        return {"target_kind": target_kind, "target_config": target_config or {}}
    own = evaluation.target
    if own is None and not evaluation.target_kind:
        raise InvalidInput(
            "was deleted: choose another for the evaluation", field="target"
        )
    if target_config is None:
        if own is not None:
            return {"target": own}
        return {
            "target_kind": evaluation.target_kind,
            "target_config": evaluation.target_config,
        }
    kind = own.kind if own is not None else evaluation.target_kind
    config = own.config if own is not None else evaluation.target_config
    return {"target_kind": kind, "target_config": {**config, **target_config}}


def evaluation_run(
    *,
    evaluation: Evaluation,
    user: User | None,
    trigger: str = Trigger.MANUAL,
    schedule: Schedule | None = None,
    target: Target | None = None,
    target_kind: str | None = None,
    target_config: dict[str, Any] | None = None,
    name: str = "",
) -> Run:
    """Start a run of the evaluation (on its dataset version of now), checked
    as a new run is; ``user`` None for a schedule. The run names the
    evaluation, the trigger and the schedule that made it."""
    if user is not None:
        require(user, evaluation.project, Action.EDIT)
    chosen = _target_arguments(
        evaluation, target=target, target_kind=target_kind, target_config=target_config
    )
    with transaction.atomic():
        run = run_create(
            user=user,
            dataset=evaluation_dataset(evaluation),
            scorers=evaluation.scorers,
            options=evaluation.options,
            name=name or evaluation.name,
            launch=False,
            **chosen,
        )
        run.evaluation = evaluation
        run.schedule = schedule
        run.evaluation_trigger = trigger
        run.save(update_fields=["evaluation", "schedule", "evaluation_trigger"])
        transaction.on_commit(lambda: run_launch(run=run))
    return run


def evaluation_sample(*, evaluation: Evaluation, user: User, items: int) -> Run:
    """A paid sample of the evaluation's first ``items`` items (editors): a
    run of its own, not of the evaluation, that the next run's estimate then
    reads as a past run of its target."""
    require(user, evaluation.project, Action.EDIT)
    chosen = _target_arguments(
        evaluation, target=None, target_kind=None, target_config=None
    )
    return estimate_sample(
        user=user,
        dataset=evaluation_dataset(evaluation),
        scorers=evaluation.scorers,
        options=evaluation.options,
        items=items,
        **chosen,
    )


def run_announce(run: Run) -> None:
    """Called when a run of an evaluation has ended (``run_end.run_ended``):
    hand the run to its evaluation's enabled channels, compared with its
    baseline and floors in the background (``announce_later``): a tie, or
    nothing worse, sends nothing."""
    evaluation = run.evaluation
    if evaluation is None:
        return
    channel_ids = list(
        evaluation.channels.filter(enabled=True).values_list("pk", flat=True)
    )
    if not channel_ids:
        return
    baseline = evaluation_baseline(evaluation, run)
    announce_later(
        run_id=run.pk,
        baseline_id=baseline.pk if baseline is not None else None,
        channel_ids=channel_ids,
        floors=evaluation.pass_rate_floors or None,
    )

"""Writes: every change to projects, targets, runs and keys goes through here."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs import events
from runs.access import require_role
from runs.errors import Conflict, InvalidInput
from runs.executor.launchers import get_launcher
from runs.executor.options import RunOptions
from runs.models import ApiKey, Dataset, Membership, Project, Run, RunStatus, Target
from runs.scorers import clean_scorer_specs
from runs.secrets import check_secrets_exist
from runs.targets import ConfigError, clean_target_config

API_KEY_PREFIX = "evk_"


def project_create(
    *, name: str, owner: AbstractBaseUser, description: str = ""
) -> Project:
    """Create a project with ``owner`` as its admin."""
    name = name.strip()
    if not name:
        raise InvalidInput("is required", field="name")
    with transaction.atomic():
        project, created = Project.objects.get_or_create(
            name=name, defaults={"description": description}
        )
        if not created:
            raise Conflict(f"a project named {name!r} exists")
        Membership.objects.create(
            project=project, user=owner, role=Membership.Role.ADMIN
        )
    return project


def target_create(
    *,
    project: Project,
    user: AbstractBaseUser,
    name: str,
    kind: str,
    config: dict[str, Any],
) -> Target:
    """Validate a target configuration and store it (secrets only as env names)."""
    require_role(user, project, Membership.Role.EDITOR)
    name = name.strip()
    if not name:
        raise InvalidInput("is required", field="name")
    try:
        cleaned = clean_target_config(kind, config)
    except ConfigError as exc:
        raise InvalidInput(
            exc.message, field=f"config.{exc.field}" if exc.field != "kind" else "kind"
        ) from None
    try:
        with transaction.atomic():
            return Target.objects.create(
                project=project, name=name, kind=kind, config=cleaned, created_by=user
            )
    except IntegrityError:
        raise Conflict(f"a target named {name!r} exists in {project}") from None


def run_create(
    *,
    user: AbstractBaseUser | None,
    dataset: Dataset,
    target: Target | None = None,
    target_kind: str | None = None,
    target_config: dict[str, Any] | None = None,
    scorers: list[Any],
    options: dict[str, Any] | RunOptions | None = None,
    name: str = "",
    parent: Run | None = None,
    launch: bool = True,
) -> Run:
    """Create a run with a frozen copy of its configuration, and launch it."""
    project = dataset.project
    if user is not None:
        require_role(user, project, Membership.Role.EDITOR)
    if target is not None:
        if target.project_id != project.pk:
            raise InvalidInput(
                "belongs to another project than the dataset", field="target"
            )
        target_kind, target_config = target.kind, target.config
    if not target_kind:
        raise InvalidInput("is required", field="target")
    try:
        config = clean_target_config(target_kind, target_config or {})
    except ConfigError as exc:
        field = "target" if exc.field == "kind" else f"target_config.{exc.field}"
        raise InvalidInput(exc.message, field=field) from None
    try:
        check_secrets_exist(project=project, kind=target_kind, config=config)
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field=f"target_config.{exc.field}") from None
    try:
        scorer_specs = clean_scorer_specs(scorers)
    except ConfigError as exc:
        raise InvalidInput(exc.message, field=exc.field) from None
    if not scorer_specs:
        raise InvalidInput("choose at least one scorer", field="scorers")
    if not isinstance(options, RunOptions):
        try:
            options = RunOptions.from_dict(options)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, field=f"options.{exc.field}") from None
    run = Run.objects.create(
        project=project,
        name=name.strip(),
        dataset=dataset,
        dataset_hash=dataset.content_hash,
        target=target,
        target_name=target.name if target else target_kind,
        target_kind=target_kind,
        target_config=config,
        scorers=scorer_specs,
        options=options.to_dict(),
        total=dataset.item_count * options.epochs,
        parent=parent,
        created_by=user,
    )
    if launch:
        transaction.on_commit(lambda: run_launch(run=run))
    return run


def run_launch(*, run: Run) -> None:
    get_launcher().launch(run.pk)


def run_cancel(*, run: Run, user: AbstractBaseUser | None = None) -> Run:
    """Ask a run to stop; harmless when repeated or when the run has ended.

    A pending run that no executor has claimed ends at once; a running one is
    stopped by its executor, in whatever process, within a second.
    """
    if user is not None:
        require_role(user, run.project, Membership.Role.EDITOR)
    if run.is_final:
        return run
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    unclaimed = Run.objects.filter(
        pk=run.pk, status=RunStatus.PENDING, heartbeat_at__isnull=True
    ).update(status=RunStatus.CANCELLED, finished_at=timezone.now())
    get_launcher().cancel(run.pk)
    run.refresh_from_db()
    if unclaimed:
        events.publish_run_update_sync(run.pk, final=True)
    return run


def api_key_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiKey, str]:
    """Create an API key; the plain key is returned once and never stored."""
    secret = secrets.token_urlsafe(32)
    prefix = secrets.token_hex(4)
    plain = f"{API_KEY_PREFIX}{prefix}_{secret}"
    key = ApiKey.objects.create(
        user=user,
        name=name.strip() or "default",
        prefix=prefix,
        key_hash=api_key_hash(plain),
    )
    return key, plain


def api_key_hash(plain: str) -> str:
    # Keys carry 256 bits of randomness, so one round of SHA-256 suffices.
    return hashlib.sha256(plain.encode()).hexdigest()


def api_key_authenticate(plain: str) -> ApiKey | None:
    """The active key matching ``plain``, with its user, or None."""
    parts = plain.removeprefix(API_KEY_PREFIX).split("_", 1)
    if not plain.startswith(API_KEY_PREFIX) or len(parts) != 2:
        return None
    key = (
        ApiKey.objects.select_related("user")
        .filter(prefix=parts[0], revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if key is None or not secrets.compare_digest(key.key_hash, api_key_hash(plain)):
        return None
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key

"""Writes to targets, and sending one request to a target (try)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from runs.access import Action, require
from runs.calls.pricing import PriceTable, price_table, use_prices
from runs.errors import ConfigError, Conflict, InvalidInput
from runs.models import (
    Project,
    Target,
)
from runs.plugins import TargetContext
from runs.records.names import clean_name
from runs.secrets.redaction import Redactor
from runs.secrets.store import (
    check_target_secrets,
    target_context,
)
from runs.targets import clean_target_config, trial, try_throttle
from runs.targets.selectors import target_get


def target_create(
    *,
    project: Project,
    user: User,
    name: str,
    kind: str,
    config: dict[str, Any],
) -> Target:
    """Validate a target configuration and store it (secrets only as env names)."""
    require(user, project, Action.EDIT)
    name = clean_name(name, model=Target)
    cleaned = clean_target_config(kind, config, path="config")
    check_target_secrets(project=project, kind=kind, config=cleaned, path="config")
    try:
        with transaction.atomic():
            return Target.objects.create(
                project=project, name=name, kind=kind, config=cleaned, created_by=user
            )
    except IntegrityError:
        raise Conflict(f"a target named {name!r} exists in {project}") from None


TARGET_TRY_TIMEOUT_SECONDS = 5.0
TARGET_TRY_MAX_CHARS = trial.MAX_CHARS
TARGET_TRY_DEFAULT_INPUT = "Say hello"


def target_update(
    *,
    target: Target,
    user: User,
    name: str | None = None,
    config: dict[str, Any] | None = None,
) -> Target:
    """Rename a target or replace its configuration, validated as on creation.

    Runs keep the frozen copy they were started with.
    """
    require(user, target.project, Action.EDIT)
    changed: list[str] = []
    if name is not None:
        name = clean_name(name, model=Target)
        target.name = name
        changed.append("name")
    if config is not None:
        target.config = clean_target_config(target.kind, config, path="config")
        check_target_secrets(
            project=target.project,
            kind=target.kind,
            config=target.config,
            path="config",
        )
        changed.append("config")
    if not changed:
        return target
    try:
        with transaction.atomic():
            target.save(update_fields=changed)
    except IntegrityError:
        raise Conflict(f"a target named {name!r} exists in {target.project}") from None
    return target


def target_delete(*, target: Target, user: User) -> None:
    """Delete a target; its runs keep their frozen name, kind and configuration."""
    require(user, target.project, Action.EDIT)
    with transaction.atomic():
        target.delete()


async def target_try(
    *,
    target_id: int,
    user: User,
    text: str = TARGET_TRY_DEFAULT_INPUT,
    seconds: float = TARGET_TRY_TIMEOUT_SECONDS,
) -> trial.TargetTry:
    """Send one input through the target's real code path, for at most ``seconds``.

    Runs on the event loop: a slow target holds no server thread while it is
    waited for. Each user has a few tries at a time and a few a minute
    (``try_throttle``); one more raises TooManyRequests. The answer or the
    error is returned with every secret the target was given replaced, so a
    server that echoes its headers cannot reveal one.
    """
    plan = await _try_prepare(target_id=target_id, user=user, text=text)
    if plan.context is None or plan.redactor is None:
        return trial.TargetTry(ok=False, error=plan.error, error_type="ConfigError")
    async with try_throttle.try_slot(user_id=user.pk, lease=seconds + 5):
        # A judge (a scorer target) prices its tokens from this table.
        with use_prices(plan.prices):
            outcome = await trial.send_one(
                plan.target.kind, plan.target.config, text, seconds, plan.context
            )
    return await trial.redacted(outcome, plan.redactor)


@dataclass(frozen=True, slots=True)
class _TryPlan:
    target: Target
    prices: PriceTable
    context: TargetContext | None  # None: its secrets cannot be had (``error``)
    redactor: Redactor | None
    error: str = ""


@sync_to_async
def _try_prepare(*, target_id: int, user: User, text: str) -> _TryPlan:
    """What a try reads from the database, read before it goes out."""
    target = target_get(user=user, target_id=target_id)
    require(user, target.project, Action.EDIT)
    if not text.strip():
        raise InvalidInput("is required", field="input")
    if len(text) > TARGET_TRY_MAX_CHARS:
        raise InvalidInput(
            f"must be at most {TARGET_TRY_MAX_CHARS} characters", field="input"
        )
    prices = price_table()
    try:
        context = target_context(target.project_id, target.kind, target.config)
    except ConfigError as exc:
        return _TryPlan(target, prices, None, None, str(exc))
    # Built here, off the event loop (a run's redactor costs a fraction of a second).
    return _TryPlan(target, prices, context, Redactor.of(context))

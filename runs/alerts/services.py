"""Alert channels (create, change, delete, test) and ``announce``.

Channels belong to a project: an editor of the project manages them, a
member sees them, and nothing of one project's channels can be used or seen
from another (``announce`` sends a run's alert only to its own project's).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction

from runs.access import Action, require
from runs.alerts import payloads
from runs.alerts.dispatch import deliver_later, run_later
from runs.alerts.findings import Finding, clean_floors, findings
from runs.calls.netpolicy import clean_target_url
from runs.errors import Conflict, InvalidInput
from runs.models import AlertChannel, AlertDelivery, Project, Run
from runs.records.names import clean_name
from runs.secrets.destinations import Destination
from runs.secrets.store import encrypt

__all__ = [
    "ChannelSaved",
    "Finding",
    "announce",
    "announce_later",
    "channel_create",
    "channel_delete",
    "channel_rotate_secret",
    "channel_test",
    "channel_update",
    "clean_channels",
    "findings",
]

logger = logging.getLogger(__name__)

Kind = AlertChannel.Kind
MAX_EMAILS = 20
SECRET_PREFIX = "whsec_"


@dataclass(frozen=True, slots=True)
class ChannelSaved:
    channel: AlertChannel
    # A webhook's signing secret, when it was just made: shown this once.
    secret: str | None = None


def _clean_kind(kind: Any) -> str:
    if kind not in Kind.values:
        raise InvalidInput(f"must be one of {', '.join(Kind.values)}", field="kind")
    return str(kind)


def _clean_url(url: Any) -> str:
    if not str(url or "").strip():
        raise InvalidInput("is required", field="url")
    try:
        return clean_target_url(url)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="url") from None


def _clean_emails(emails: Any) -> list[str]:
    if isinstance(emails, str) or not isinstance(emails, Sequence):
        raise InvalidInput("must be a list of addresses", field="emails")
    cleaned: list[str] = []
    for position, email in enumerate(emails):
        address = str(email).strip()
        try:
            validate_email(address)
        except ValidationError:
            raise InvalidInput(
                f"{address!r} is not an email address", field=f"emails[{position}]"
            ) from None
        if address not in cleaned:
            cleaned.append(address)
    if not cleaned:
        raise InvalidInput("name at least one address", field="emails")
    if len(cleaned) > MAX_EMAILS:
        raise InvalidInput(f"at most {MAX_EMAILS} addresses", field="emails")
    return cleaned


def _set_url(channel: AlertChannel, url: str) -> None:
    channel.url_ciphertext = encrypt(url)
    channel.url_origin = str(Destination.of(url))


def _new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def _saved(channel: AlertChannel) -> None:
    try:
        with transaction.atomic():
            channel.save()
    except IntegrityError:
        raise InvalidInput(
            f"{channel.project} already has a channel named {channel.name!r}",
            field="name",
        ) from None


def channel_create(
    *,
    project: Project,
    user: User,
    name: str,
    kind: str,
    url: str | None = None,
    emails: Sequence[str] | None = None,
    enabled: bool = True,
) -> ChannelSaved:
    """A new channel of the project (editors); a webhook's secret comes back once."""
    require(user, project, Action.EDIT)
    channel = AlertChannel(
        project=project,
        name=clean_name(name, model=AlertChannel),
        kind=_clean_kind(kind),
        enabled=bool(enabled),
        created_by=user,
    )
    secret = None
    if channel.kind == Kind.EMAIL:
        channel.emails = _clean_emails(emails if emails is not None else [])
    else:
        _set_url(channel, _clean_url(url))
    if channel.kind == Kind.WEBHOOK:
        secret = _new_secret()
        channel.secret_ciphertext = encrypt(secret)
    _saved(channel)
    return ChannelSaved(channel, secret)


def channel_update(
    *,
    channel: AlertChannel,
    user: User,
    name: str | None = None,
    url: str | None = None,
    emails: Sequence[str] | None = None,
    enabled: bool | None = None,
) -> ChannelSaved:
    """Change what is given of a channel (editors); its kind stays."""
    require(user, channel.project, Action.EDIT)
    if name is not None:
        channel.name = clean_name(name, model=AlertChannel)
    if enabled is not None:
        channel.enabled = bool(enabled)
    if channel.kind == Kind.EMAIL:
        if emails is not None:
            channel.emails = _clean_emails(emails)
        elif url:
            raise InvalidInput("an email channel has no URL", field="url")
    elif url:
        _set_url(channel, _clean_url(url))
    elif emails:
        raise InvalidInput(f"a {channel.kind} channel has no addresses", field="emails")
    _saved(channel)
    return ChannelSaved(channel)


def channel_rotate_secret(*, channel: AlertChannel, user: User) -> ChannelSaved:
    """A new signing secret for a webhook (editors), shown once; the old one ends."""
    require(user, channel.project, Action.EDIT)
    if channel.kind != Kind.WEBHOOK:
        raise Conflict(f"a {channel.kind} channel has no signing secret")
    secret = _new_secret()
    channel.secret_ciphertext = encrypt(secret)
    channel.save(update_fields=["secret_ciphertext", "updated_at"])
    return ChannelSaved(channel, secret)


def channel_delete(*, channel: AlertChannel, user: User) -> None:
    """Delete a channel and its delivery log (editors)."""
    require(user, channel.project, Action.EDIT)
    channel.delete()


def channel_test(*, channel: AlertChannel, user: User) -> AlertDelivery:
    """Send a test to the channel (editors), off this request; its delivery."""
    require(user, channel.project, Action.EDIT)
    with transaction.atomic():
        delivery = AlertDelivery.objects.create(
            channel=channel,
            test=True,
            payload=payloads.test_payload(
                project=channel.project, channel_name=channel.name
            ),
        )
        deliver_later([delivery.pk])
    return delivery


def clean_channels(
    *, project: Project, channel_ids: Iterable[int], field: str = "channels"
) -> list[AlertChannel]:
    """The project's channels of these ids (for an evaluation's channels);
    InvalidInput naming the first id that is not one of them."""
    ids = list(dict.fromkeys(channel_ids))
    found = {c.pk: c for c in AlertChannel.objects.filter(project=project, pk__in=ids)}
    for position, channel_id in enumerate(ids):
        if channel_id not in found:
            raise InvalidInput(
                f"no alert channel {channel_id} in {project}",
                field=f"{field}[{position}]",
            )
    return [found[channel_id] for channel_id in ids]


def announce(
    run: Run,
    baseline: Run | None,
    channels: Iterable[AlertChannel],
    floors: Mapping[str, float] | None = None,
) -> list[AlertDelivery]:
    """Tell the channels of what is wrong with ``run``, if anything.

    The findings (``findings``) against ``baseline`` and ``floors``; when
    there are any, one delivery per enabled channel of the run's project,
    sent once this transaction commits, off the caller's path. A channel of
    another project is never sent to. The deliveries made (none: nothing to
    tell).
    """
    floors = clean_floors(floors)
    found = findings(run, baseline, floors)
    if not found:
        return []
    payload = payloads.alert_payload(run=run, baseline=baseline, findings=found)
    deliveries = []
    for channel in channels:
        if channel.project_id != run.project_id:
            logger.warning(
                "run %s: channel %s belongs to another project; not sent",
                run.pk,
                channel.pk,
            )
            continue
        if channel.enabled:
            deliveries.append(AlertDelivery(channel=channel, run=run, payload=payload))
    with transaction.atomic():
        made = AlertDelivery.objects.bulk_create(deliveries)
        deliver_later(delivery.pk for delivery in made)
    return made


def _announce_by_ids(
    run_id: int,
    baseline_id: int | None,
    channel_ids: Sequence[int],
    floors: Mapping[str, float] | None,
) -> list[int]:
    run = Run.objects.select_related("project").get(pk=run_id)
    baseline = Run.objects.filter(pk=baseline_id).first() if baseline_id else None
    channels = AlertChannel.objects.filter(pk__in=channel_ids, project=run.project)
    return [d.pk for d in announce(run, baseline, channels, floors)]


async def _announce_async(
    run_id: int,
    baseline_id: int | None,
    channel_ids: Sequence[int],
    floors: Mapping[str, float] | None,
) -> list[int]:
    return await database_sync_to_async(_announce_by_ids)(
        run_id, baseline_id, channel_ids, floors
    )


def announce_later(
    *,
    run_id: int,
    baseline_id: int | None,
    channel_ids: Sequence[int],
    floors: Mapping[str, float] | None = None,
) -> None:
    """``announce`` on the alerts' own loop: the comparison is not computed on
    the caller's path (an executor ending a run calls this)."""
    run_later(_announce_async(run_id, baseline_id, list(channel_ids), floors))

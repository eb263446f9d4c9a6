"""Reads of alert channels and their delivery logs, scoped to membership."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from runs.access import Action, project_ids_where, require
from runs.errors import NotFound
from runs.models import AlertChannel, AlertDelivery, Project

DELIVERIES_SHOWN = 50


def channel_list(
    *, user: User | AnonymousUser, project: Project | None = None
) -> QuerySet[AlertChannel]:
    """The channels of the user's projects (of ``project`` only, when given)."""
    channels = AlertChannel.objects.filter(
        project_id__in=project_ids_where(user, Action.VIEW)
    ).select_related("project")
    if project is not None:
        channels = channels.filter(project=project)
    return channels.order_by("project__name", "name")


def channel_get(
    *, user: User | AnonymousUser, channel_id: int, action: Action = Action.VIEW
) -> AlertChannel:
    """A channel the user may see (and do ``action`` with); NotFound otherwise."""
    channel = (
        AlertChannel.objects.select_related("project").filter(pk=channel_id).first()
    )
    if channel is None:
        raise NotFound(f"no alert channel {channel_id}")
    try:
        require(user, channel.project, action)
    except NotFound:
        raise NotFound(f"no alert channel {channel_id}") from None
    return channel


def delivery_list(*, channel: AlertChannel) -> QuerySet[AlertDelivery]:
    """The channel's deliveries, newest first."""
    return channel.deliveries.select_related("run").order_by("-created_at", "-id")

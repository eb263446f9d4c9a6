"""The endpoints of alert channels: CRUD, a test, the delivery log."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from ninja import Query, Router, Schema, Status

from runs.access import Action
from runs.alerts import selectors, services
from runs.alerts.schemas import (
    ChannelCreatedOut,
    ChannelIn,
    ChannelOut,
    ChannelPatch,
    DeliveryOut,
)
from runs.models import AlertChannel, AlertDelivery
from runs.projects.selectors import project_get
from runs.web.api import ERRORS, READ_ERRORS, paginated
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

channel_router = Router(tags=["alerts"])


class ChannelFilter(Schema):
    project: DbId | None = None


def _created(saved: services.ChannelSaved) -> dict[str, Any]:
    return {
        **ChannelOut.model_validate(saved.channel).model_dump(),
        "secret": saved.secret,
    }


@channel_router.get("", response={200: list[ChannelOut], **READ_ERRORS})
@paginated
def list_channels(
    request: ApiRequest, filters: Query[ChannelFilter]
) -> QuerySet[AlertChannel]:
    """The alert channels of your projects (of one, with ``?project=``)."""
    project = None
    if filters.project is not None:
        project = project_get(user=request.auth, project_id=filters.project)
    return selectors.channel_list(user=request.auth, project=project)


@channel_router.post("", response={201: ChannelCreatedOut, **ERRORS})
def create_channel(request: ApiRequest, payload: ChannelIn) -> Status[dict[str, Any]]:
    """A channel of a project (editors); a webhook's secret is returned once."""
    project = project_get(user=request.auth, project_id=payload.project)
    saved = services.channel_create(
        project=project, user=request.auth, **payload.model_dump(exclude={"project"})
    )
    return Status(201, _created(saved))


@channel_router.get("/{channel_id}", response={200: ChannelOut, **READ_ERRORS})
def get_channel(request: ApiRequest, channel_id: DbId) -> AlertChannel:
    return selectors.channel_get(user=request.auth, channel_id=channel_id)


@channel_router.patch("/{channel_id}", response={200: ChannelOut, **ERRORS})
def update_channel(
    request: ApiRequest, channel_id: DbId, payload: ChannelPatch
) -> AlertChannel:
    """Change a channel's name, URL, addresses or whether it is on (editors)."""
    channel = selectors.channel_get(
        user=request.auth, channel_id=channel_id, action=Action.EDIT
    )
    return services.channel_update(
        channel=channel, user=request.auth, **payload.dict(exclude_unset=True)
    ).channel


@channel_router.delete("/{channel_id}", response={204: None, **ERRORS})
def delete_channel(request: ApiRequest, channel_id: DbId) -> Status[None]:
    channel = selectors.channel_get(
        user=request.auth, channel_id=channel_id, action=Action.EDIT
    )
    services.channel_delete(channel=channel, user=request.auth)
    return Status(204, None)


@channel_router.post(
    "/{channel_id}/secret", response={200: ChannelCreatedOut, **ERRORS}
)
def rotate_secret(request: ApiRequest, channel_id: DbId) -> dict[str, Any]:
    """A new signing secret for a webhook, returned once; the old one stops."""
    channel = selectors.channel_get(
        user=request.auth, channel_id=channel_id, action=Action.EDIT
    )
    return _created(services.channel_rotate_secret(channel=channel, user=request.auth))


@channel_router.post("/{channel_id}/test", response={202: DeliveryOut, **ERRORS})
def test_channel(request: ApiRequest, channel_id: DbId) -> Status[AlertDelivery]:
    """Send a test; the delivery comes back at once, its attempts follow."""
    channel = selectors.channel_get(
        user=request.auth, channel_id=channel_id, action=Action.EDIT
    )
    return Status(202, services.channel_test(channel=channel, user=request.auth))


@channel_router.get(
    "/{channel_id}/deliveries", response={200: list[DeliveryOut], **READ_ERRORS}
)
@paginated
def list_deliveries(request: ApiRequest, channel_id: DbId) -> QuerySet[AlertDelivery]:
    """The channel's delivery log, newest first, each with its attempts."""
    channel = selectors.channel_get(user=request.auth, channel_id=channel_id)
    return selectors.delivery_list(channel=channel)

"""The API schemas of alert channels and their deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema

from runs.models import AlertChannel, AlertDelivery
from runs.web.schemas import BodyIn, DbId


class ChannelIn(BodyIn):
    project: DbId
    name: str = Field(min_length=1, max_length=200)
    kind: AlertChannel.Kind
    url: str | None = Field(
        None,
        description="a webhook's or Slack incoming webhook's URL; stored "
        "encrypted, never returned (only its origin is)",
    )
    emails: list[str] | None = Field(None, description="an email channel's addresses")
    enabled: bool = True


class ChannelPatch(BodyIn):
    name: str | None = Field(None, min_length=1, max_length=200)
    url: str | None = Field(None, description="a new URL; leave out to keep it")
    emails: list[str] | None = None
    enabled: bool | None = None


class ChannelOut(Schema):
    id: int
    project: int
    name: str
    kind: AlertChannel.Kind
    url_origin: str = Field(description="scheme://host[:port] of the URL")
    emails: list[str]
    enabled: bool
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_project(obj: AlertChannel | dict[str, Any]) -> int:
        # A channel, or (with its secret, once) a channel's fields.
        return obj["project"] if isinstance(obj, dict) else obj.project_id


class ChannelCreatedOut(ChannelOut):
    secret: str | None = Field(
        description="a webhook's signing secret, returned only this once: "
        "X-Evalsite-Signature is sha256=HMAC-SHA256(secret, "
        "'<X-Evalsite-Timestamp>.<body>')"
    )


class DeliveryOut(Schema):
    id: int
    channel: int = Field(alias="channel_id")
    run: int | None = Field(alias="run_id")
    test: bool
    status: AlertDelivery.Status
    attempts: list[dict[str, Any]] = Field(
        description="each attempt: number, at, outcome, status_code, error, seconds"
    )
    payload: dict[str, Any]
    created_at: datetime
    finished_at: datetime | None

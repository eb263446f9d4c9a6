"""The admin's view of alert channels and deliveries: no URL nor secret shown."""

from __future__ import annotations

from django.contrib import admin

from runs.models import AlertChannel, AlertDelivery
from runs.web.admin import NoAddAdmin, ReadOnlyAdmin


@admin.register(AlertChannel)
class AlertChannelAdmin(NoAddAdmin):
    """Channels are made on the dashboard or the API (the URL and the signing
    secret are stored encrypted); here they can be seen, switched off or
    deleted."""

    list_display = ["name", "kind", "project", "url_origin", "enabled", "created_at"]
    list_filter = ["kind", "enabled", "project"]
    search_fields = ["name", "project__name"]
    fields = ["project", "name", "kind", "url_origin", "emails", "enabled"]
    readonly_fields = ["project", "kind", "url_origin"]


@admin.register(AlertDelivery)
class AlertDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["pk", "channel", "run", "test", "status", "created_at"]
    list_filter = ["status", "test", "channel__project"]
    search_fields = ["channel__name"]
    fields = readonly_fields = (
        "channel",
        "run",
        "test",
        "status",
        "payload",
        "attempts",
        "created_at",
        "finished_at",
    )

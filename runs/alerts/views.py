"""The pages of alert channels: a project's list, a channel with its log."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from runs.access import Action, can
from runs.alerts import selectors, services
from runs.alerts.forms import ChannelEditForm, ChannelForm
from runs.models import AlertChannel
from runs.projects.selectors import project_get
from runs.web.forms import form_saved
from runs.web.pages import posted
from runs.web.requests import AuthedRequest

DETAIL = "runs/alerts/channel_detail.html"


@never_cache
@require_http_methods(["GET", "POST"])
def channel_list(request: AuthedRequest, project_id: int) -> HttpResponse:
    project = project_get(
        user=request.user, project_id=project_id, action=posted(request, Action.EDIT)
    )
    form = ChannelForm(request.POST or None)
    saved = form_saved(
        form, services.channel_create, project=project, user=request.user
    )
    if saved is not None:
        messages.success(request, f"Channel {saved.channel.name} added.")
        if saved.secret is None:
            return redirect("runs:channel_detail", channel_id=saved.channel.pk)
        # The secret is shown on this answer only, never again.
        return _detail(request, saved.channel, secret=saved.secret)
    context = {
        "project": project,
        "channels": selectors.channel_list(user=request.user, project=project),
        "can_edit": can(request.user, project, Action.EDIT),
        "form": form,
    }
    return render(request, "runs/alerts/channel_list.html", context)


def _detail(
    request: AuthedRequest,
    channel: AlertChannel,
    *,
    form: ChannelEditForm | None = None,
    secret: str | None = None,
) -> HttpResponse:
    deliveries = list(
        selectors.delivery_list(channel=channel)[: selectors.DELIVERIES_SHOWN]
    )
    context: dict[str, Any] = {
        "channel": channel,
        "project": channel.project,
        "deliveries": deliveries,
        # The log follows a delivery still being sent (or waiting to retry).
        "sending": any(not delivery.is_final for delivery in deliveries),
        "evaluations": channel.evaluations.order_by("name"),
        "can_edit": can(request.user, channel.project, Action.EDIT),
        "form": form or ChannelEditForm(channel=channel),
        "secret": secret,
    }
    return render(request, DETAIL, context)


@never_cache
@require_http_methods(["GET", "POST"])
def channel_detail(request: AuthedRequest, channel_id: int) -> HttpResponse:
    channel = selectors.channel_get(
        user=request.user, channel_id=channel_id, action=posted(request, Action.EDIT)
    )
    form = ChannelEditForm(request.POST or None, channel=channel)
    saved = form_saved(
        form, services.channel_update, channel=channel, user=request.user
    )
    if saved is not None:
        messages.success(request, f"Channel {saved.channel.name} saved.")
        return redirect("runs:channel_detail", channel_id=channel.pk)
    if form.is_bound:
        channel.refresh_from_db()
    return _detail(request, channel, form=form)


def _edited(request: AuthedRequest, channel_id: int) -> AlertChannel:
    return selectors.channel_get(
        user=request.user, channel_id=channel_id, action=Action.EDIT
    )


@require_POST
def channel_test(request: AuthedRequest, channel_id: int) -> HttpResponse:
    channel = _edited(request, channel_id)
    delivery = services.channel_test(channel=channel, user=request.user)
    messages.success(
        request, f"Test {delivery.pk} is on its way; its attempts appear below."
    )
    return redirect("runs:channel_detail", channel_id=channel.pk)


@never_cache
@require_POST
def channel_secret(request: AuthedRequest, channel_id: int) -> HttpResponse:
    channel = _edited(request, channel_id)
    saved = services.channel_rotate_secret(channel=channel, user=request.user)
    return _detail(request, saved.channel, secret=saved.secret)


@require_POST
def channel_delete(request: AuthedRequest, channel_id: int) -> HttpResponse:
    channel = _edited(request, channel_id)
    project_id = channel.project_id
    services.channel_delete(channel=channel, user=request.user)
    messages.success(request, f"Channel {channel.name} deleted.")
    return redirect("runs:channel_list", project_id=project_id)

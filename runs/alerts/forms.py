"""Forms of the alert channel pages."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from runs.models import AlertChannel

URL_HELP = (
    "Where alerts are POSTed: a webhook's URL, or a Slack (or compatible) "
    "incoming webhook's. Stored encrypted and never shown again, only its host; "
    "it must pass the operator's network policy."
)
EMAILS_HELP = "Addresses separated by commas, for an email channel."


def _addresses(text: str) -> list[str] | None:
    return [a for a in re.split(r"[,\s;]+", text) if a] or None


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=AlertChannel.Kind.choices)
    url = forms.CharField(
        max_length=2000, required=False, label="URL", help_text=URL_HELP
    )
    emails = forms.CharField(
        max_length=4000, required=False, label="Email addresses", help_text=EMAILS_HELP
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def clean_url(self) -> str | None:
        return self.cleaned_data["url"].strip() or None

    def clean_emails(self) -> list[str] | None:
        return _addresses(self.cleaned_data["emails"])


class ChannelEditForm(ChannelForm):
    """A channel's name, URL (empty: kept), addresses and switch; not its kind."""

    def __init__(self, *args: Any, channel: AlertChannel, **kwargs: Any) -> None:
        kwargs["initial"] = {
            "name": channel.name,
            "emails": ", ".join(channel.emails),
            "enabled": channel.enabled,
        }
        super().__init__(*args, **kwargs)
        del self.fields["kind"]
        self.fields["url"].help_text = "Leave empty to keep the URL. " + URL_HELP
        if channel.kind == AlertChannel.Kind.EMAIL:
            del self.fields["url"]
        else:
            del self.fields["emails"]

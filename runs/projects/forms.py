"""Forms of the projects, members, API keys and target-try pages."""

from __future__ import annotations

import re

from django import forms

from runs.models import ApiKey, Membership, Project
from runs.web.forms import MultilineField


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=Project._meta.get_field("name").max_length)
    description = MultilineField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False
    )


class MemberAddForm(forms.Form):
    user = forms.CharField(
        max_length=254,
        label="Username or email",
        help_text="Someone who already has an account.",
    )
    role = forms.ChoiceField(
        choices=Membership.Role.choices, initial=Membership.Role.EDITOR
    )


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        max_length=ApiKey._meta.get_field("name").max_length,
        help_text="What the key is for, e.g. the script or machine using it.",
    )


class SecretForm(forms.Form):
    """Set a project secret or its hosts; the value is never rendered back."""

    name = forms.RegexField(
        regex=r"^[A-Za-z_][A-Za-z0-9_]*\Z",
        max_length=100,
        help_text="Letters, digits and underscores, e.g. OPENAI_API_KEY. "
        "Setting an existing name replaces what you give of it.",
        error_messages={
            "invalid": "Use letters, digits and underscores, not starting with a digit."
        },
    )
    value = forms.CharField(
        max_length=8192,
        strip=True,
        required=False,
        widget=forms.PasswordInput(
            render_value=False, attrs={"autocomplete": "new-password"}
        ),
        help_text="Required for a new secret; stored encrypted and never shown "
        "again. Leave empty to keep an existing secret's value.",
    )
    hosts = forms.CharField(
        max_length=2000,
        required=False,
        help_text="Required for a new secret: where it may be sent, separated "
        "by commas: a host (https on port 443), *.suffix for the names below "
        "it, or scheme://host:port, e.g. api.openai.com, http://127.0.0.1:8000. "
        "Leave empty to keep an existing secret's hosts.",
    )

    def clean_value(self) -> str | None:
        return self.cleaned_data["value"] or None

    def clean_hosts(self) -> list[str] | None:
        text = self.cleaned_data["hosts"]
        return [h for h in re.split(r"[,\s]+", text) if h] or None

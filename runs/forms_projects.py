"""Forms of the projects, members, API keys and target-try pages."""

from __future__ import annotations

from django import forms

from runs.models import ApiKey, Membership, Project
from runs.services import TARGET_TRY_DEFAULT_INPUT, TARGET_TRY_MAX_CHARS


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=Project._meta.get_field("name").max_length)
    description = forms.CharField(
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


class TargetTryForm(forms.Form):
    input = forms.CharField(
        max_length=TARGET_TRY_MAX_CHARS,
        initial=TARGET_TRY_DEFAULT_INPUT,
        label="Test input",
        widget=forms.Textarea(attrs={"rows": 2}),
    )

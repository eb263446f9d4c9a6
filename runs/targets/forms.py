"""The target form, with the fields its kind's parameters declare."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib.auth.models import User

from runs.models import Project, Target
from runs.projects.selectors import project_get
from runs.targets import REGISTRY as TARGETS
from runs.targets.services import TARGET_TRY_DEFAULT_INPUT, TARGET_TRY_MAX_CHARS
from runs.web.forms import (
    MultilineField,
    PickField,
    PluginFieldsMixin,
    form_field,
    project_options,
)


class TargetForm(PluginFieldsMixin, forms.Form):
    project = PickField()
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(widget=forms.RadioSelect)

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        form_field(self, "project", PickField).set_options(project_options(user))
        form_field(self, "kind", forms.ChoiceField).choices = [
            (kind, cls.label) for kind, cls in sorted(TARGETS.items())
        ]
        if "openai_chat" in TARGETS:
            self.fields["kind"].initial = "openai_chat"
        self.add_plugin_fields(TARGETS)
        self.error_paths = {"config": "kind"}

    def clean_project(self) -> Project:
        return project_get(user=self.user, project_id=self.cleaned_data["project"])

    def target_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``services.target_create``."""
        data = self.cleaned_data
        kind = data["kind"]
        return {
            "project": data["project"],
            "name": data["name"],
            "kind": kind,
            "config": self.plugin_values(kind, TARGETS[kind], path="config"),
        }

    def kind_sections(self) -> list[dict[str, Any]]:
        sections = self.plugin_sections("kind", TARGETS)
        for section in sections:
            example = TARGETS[section["kind"]].example
            section["example"] = json.dumps(example, indent=2)
        return sections

    def chosen_section(self) -> dict[str, Any] | None:
        """The section of the kind already chosen (a stored target's)."""
        kind = self["kind"].value()
        return next((s for s in self.kind_sections() if s["kind"] == kind), None)


def target_edit_form(data: Any | None, *, user: User, target: Target) -> TargetForm:
    """The target form bound to a stored target: its project and kind stay."""
    initial: dict[str, Any] = {
        "project": target.project_id,
        "name": target.name,
        "kind": target.kind,
    }
    initial |= {f"{target.kind}__{key}": value for key, value in target.config.items()}
    form = TargetForm(data, user=user, initial=initial)
    for fixed in ("project", "kind"):
        form.fields[fixed].disabled = True
    return form


class TargetTryForm(forms.Form):
    input = MultilineField(
        max_length=TARGET_TRY_MAX_CHARS,
        initial=TARGET_TRY_DEFAULT_INPUT,
        label="Test input",
        widget=forms.Textarea(attrs={"rows": 2}),
    )

"""The new-run form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User

from runs.access import Action, projects_where
from runs.datasets.selectors import dataset_get, dataset_list
from runs.executor.options import ADVANCED, BASIC, LIMITS, option_params
from runs.models import Dataset, Target
from runs.scorers import REGISTRY as SCORERS
from runs.targets.selectors import target_get, target_list
from runs.web.forms import (
    JSONTextField,
    PickField,
    PluginFieldsMixin,
    form_field,
    param_field,
)

OPTION_GROUPS = (
    (BASIC, "Options"),
    (LIMITS, "Limits and back-off"),
    (ADVANCED, "Timeouts and retries"),
)


class RunForm(PluginFieldsMixin, forms.Form):
    name = forms.CharField(max_length=200, required=False)
    dataset = PickField(help_text="Newest versions first.")
    target = PickField()
    scorers = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple, initial=["exact_match"], required=False
    )
    scorer_specs = JSONTextField(
        label="More scorers (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
        help_text=(
            'A list of scorers after the ones ticked: {"kind": ..., "name": ..., '
            '"params": {...}, "when": {"scorer": <name>, "passed": true|false}}. '
            "A name lets a kind run twice with other parameters; when runs a "
            "scorer only if an earlier one passed (or failed)."
        ),
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        editable = projects_where(user, Action.EDIT)
        datasets = (
            dataset_list(user=user)
            .filter(project__in=editable)
            .order_by("project__name", "name", "-version")
        )
        targets = (
            target_list(user=user)
            .filter(project__in=editable)
            .order_by("project__name", "name")
        )
        form_field(self, "dataset", PickField).set_options(
            (d.pk, f"{d.project} / {d.name} v{d.version} ({d.item_count} items)")
            for d in datasets
        )
        form_field(self, "target", PickField).set_options(
            (t.pk, f"{t.project} / {t.name} ({t.kind})") for t in targets
        )
        form_field(self, "scorers", forms.ChoiceField).choices = [
            (kind, cls.label) for kind, cls in sorted(SCORERS.items())
        ]
        self.add_plugin_fields(SCORERS)
        for param in option_params():
            self.fields[param.name] = param_field(param)
        self.error_paths = {"target_config": "target"}

    def clean_dataset(self) -> Dataset:
        return dataset_get(user=self.user, dataset_id=self.cleaned_data["dataset"])

    def clean_target(self) -> Target:
        return target_get(user=self.user, target_id=self.cleaned_data["target"])

    def clean_scorer_specs(self) -> list[Any]:
        specs = self.cleaned_data.get("scorer_specs")
        if specs in (None, ""):
            return []
        if not isinstance(specs, list):
            raise forms.ValidationError(
                "must be a list of scorers, e.g. "
                '[{"kind": "llm_judge", "name": "judge", "params": {...}}]'
            )
        return specs

    def run_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``services.run_create``."""
        data = self.cleaned_data
        specs: list[Any] = []
        for position, kind in enumerate(data["scorers"]):
            path = f"scorers[{position}].params"
            params = self.plugin_values(kind, SCORERS[kind], path=path)
            specs.append({"kind": kind, "params": params})
        for spec in data.get("scorer_specs") or []:
            self.error_paths[f"scorers[{len(specs)}]"] = "scorer_specs"
            specs.append(spec)
        options = {}
        for param in option_params():
            self.error_paths[f"options.{param.name}"] = param.name
            options[param.name] = data[param.name]
        return {
            "dataset": data["dataset"],
            "target": data["target"],
            "scorers": specs,
            "name": data["name"],
            "options": options,
        }

    def scorer_sections(self) -> list[dict[str, Any]]:
        return self.plugin_sections("scorers", SCORERS)

    def option_groups(self) -> list[tuple[str, str, list[forms.BoundField]]]:
        groups = []
        for group, title in OPTION_GROUPS:
            fields = [
                self[param.name]
                for param in option_params()
                if param.extra.get("group") == group
            ]
            groups.append((group, title, fields))
        return groups

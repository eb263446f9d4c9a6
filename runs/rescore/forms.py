"""The re-score form: scorers with their parameters, from the plug-ins' declarations.

As on the new-run form, a checkbox per scorer kind and a field per declared
parameter, plus the name each chosen scorer is stored under (its kind by
default): a name the run already has replaces that scorer's scores. The
fields start from the run's own scorers, so changing one parameter of a
scorer the run has is one edit.
"""

from __future__ import annotations

from typing import Any

from django import forms

from runs.models import Run
from runs.scorers import REGISTRY as SCORERS
from runs.web.forms import PluginFieldsMixin, form_field

NAME_PREFIX = "as__"


class RescoreForm(PluginFieldsMixin, forms.Form):
    scorers = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        kwargs.setdefault("initial", run_initial(run))
        super().__init__(*args, **kwargs)
        self.run = run
        form_field(self, "scorers", forms.ChoiceField).choices = [
            (kind, cls.label) for kind, cls in sorted(SCORERS.items())
        ]
        for kind in sorted(SCORERS):
            self.fields[NAME_PREFIX + kind] = forms.CharField(
                label="Stored as",
                max_length=100,
                required=False,
                help_text=f"the scorer's name (default {kind}); a name the run "
                "has replaces its scores",
            )
        self.add_plugin_fields(SCORERS)
        self.error_paths = {}

    def scorer_specs(self) -> list[dict[str, Any]]:
        """The ``scorers`` argument of ``services.run_rescore``."""
        specs = []
        for position, kind in enumerate(self.cleaned_data["scorers"]):
            where = f"scorers[{position}]"
            name_field = NAME_PREFIX + kind
            self.error_paths[f"{where}.name"] = name_field
            params = self.plugin_values(kind, SCORERS[kind], path=f"{where}.params")
            spec: dict[str, Any] = {"kind": kind, "params": params}
            name = self.cleaned_data.get(name_field, "").strip()
            if name:
                spec["name"] = name
            specs.append(spec)
        return specs

    def scorer_sections(self) -> list[dict[str, Any]]:
        sections = self.plugin_sections("scorers", SCORERS)
        for section in sections:
            section["fields"].insert(0, self[NAME_PREFIX + section["kind"]])
        return sections


def run_initial(run: Run) -> dict[str, Any]:
    """The run's scorer kinds ticked, each kind's fields filled from the run's
    first scorer of that kind."""
    kinds = [spec.get("kind") for spec in run.scorers]
    initial: dict[str, Any] = {"scorers": [k for k in SCORERS if k in kinds]}
    for spec in run.scorers:
        kind = spec.get("kind")
        if kind not in SCORERS or NAME_PREFIX + kind in initial:
            continue
        initial[NAME_PREFIX + kind] = spec.get("name") or kind
        for key, value in (spec.get("params") or {}).items():
            initial[f"{kind}__{key}"] = value
    return initial

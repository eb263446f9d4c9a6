"""Forms of the dashboard pages.

Choices are scoped to the user: a select lists only what the user may use, and
a submitted id is resolved through the selectors, so an id from a project the
user cannot see is a 404 (as in the API), and one from a project the user may
only view reaches the service, which refuses it (403).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from runs import selectors
from runs.access import editable_projects
from runs.errors import InvalidInput
from runs.executor.options import ADVANCED, BASIC, LIMITS, option_params
from runs.importers import FORMATS, Preview
from runs.models import Dataset, Project, Target
from runs.plugins import Param, Plugin, describe, number
from runs.scorers import REGISTRY as SCORERS
from runs.targets import REGISTRY as TARGETS

User = AbstractBaseUser | AnonymousUser

FORMAT_LABELS = {
    "jsonl": "JSON Lines",
    "json": "JSON",
    "csv": "CSV",
    "yaml": "YAML",
    "math": "MATH (problem, solution with a \\boxed{} answer)",
    "gsm8k": "GSM8K (question, answer after ####)",
}
DATASET_FORMATS = [
    ("", "Detect from the file name"),
    *((fmt, FORMAT_LABELS[fmt]) for fmt in FORMATS if fmt in FORMAT_LABELS),
]


class PickField(forms.IntegerField):
    """The id of an object picked from a select; the form resolves it in scope."""

    widget = forms.Select

    def set_options(self, options: Iterable[tuple[int, str]]) -> None:
        options = list(options)
        self.widget.choices = [("", "---------"), *options]
        if len(options) == 1 and self.initial is None:
            self.initial = options[0][0]  # the only choice: preselect it


def add_domain_error(form: forms.Form, exc: InvalidInput) -> None:
    """Show a service's InvalidInput on the form field it names (or the form).

    A form that turns its fields into a service's arguments records, in
    ``error_paths``, which field each argument path came from; an error on a
    path the form does not know lands on its nearest known parent.
    """
    form.add_error(_field_for(form, exc), str(exc))


def _field_for(form: forms.Form, exc: InvalidInput) -> str | None:
    if exc.line is not None or getattr(exc, "record", None) is not None:
        return "file" if "file" in form.fields else None  # inside an uploaded file
    paths: dict[str, str] = getattr(form, "error_paths", {})
    path = exc.field or ""
    while path:
        if path in paths:
            return paths[path]
        if path in form.fields:
            return path
        path = _PARENT.sub("", path)
    return None


_PARENT = re.compile(r"(\.[^.\[]*|\[\d+\])$")


# -- fields derived from a plug-in's declaration ---------------------------------


def param_field(param: Param, *, example: Any = None) -> forms.Field:
    """A form field for one declared parameter.

    Fields are never required, and bounds are only hints to the browser: the
    fields of a plug-in that is not chosen are ignored, and the declaration is
    checked once, by the service, whose error lands back on the field.
    """
    common: dict[str, Any] = {
        "label": param.label,
        "help_text": " ".join(
            part for part in (param.help, param.bounds and f"({param.bounds})") if part
        ),
        "required": False,
    }
    field: forms.Field
    if param.type == "boolean":
        field = forms.BooleanField(initial=param.default is True, **common)
    elif param.choices:
        choices = [(choice, choice) for choice in param.choices]
        if param.default is None:
            choices.insert(0, ("", "---------"))
        field = forms.ChoiceField(choices=choices, initial=param.default, **common)
    elif param.type in ("integer", "number"):
        attrs = {"step": "1" if param.type == "integer" else "any"}
        attrs |= {"min": number(param.minimum)} if param.minimum is not None else {}
        attrs |= {"max": number(param.maximum)} if param.maximum is not None else {}
        if example is not None:
            attrs["placeholder"] = str(example)
        field = forms.CharField(
            widget=forms.NumberInput(attrs=attrs), initial=param.default, **common
        )
    elif param.type == "json":
        field = forms.JSONField(
            widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
            initial=param.default,
            **common,
        )
    else:
        attrs = {"placeholder": str(example)} if example not in (None, "") else {}
        widget = (
            forms.Textarea(attrs={"rows": 3, **attrs})
            if param.extra.get("widget") == "textarea"
            else forms.TextInput(attrs=attrs)
        )
        field = forms.CharField(
            widget=widget, initial=param.default or None, strip=False, **common
        )
    field.param_required = param.required  # type: ignore[attr-defined]
    return field


class PluginFieldsMixin:
    """Adds ``<kind>__<param>`` fields for plug-ins and collects their values."""

    fields: dict[str, forms.Field]
    cleaned_data: dict[str, Any]
    error_paths: dict[str, str]

    def add_plugin_fields(self, plugins: dict[str, type[Plugin]]) -> None:
        for kind, plugin in sorted(plugins.items()):
            for param in describe(plugin.Params):
                self.fields[f"{kind}__{param.name}"] = param_field(
                    param, example=plugin.example.get(param.name)
                )

    def plugin_values(
        self, kind: str, plugin: type[Plugin], *, path: str
    ) -> dict[str, Any]:
        """The chosen plug-in's parameters; empty fields take the default."""
        values: dict[str, Any] = {}
        for param in describe(plugin.Params):
            name = f"{kind}__{param.name}"
            self.error_paths[f"{path}.{param.name}"] = name
            value = self.cleaned_data.get(name)
            if value is not None and value != "":
                values[param.name] = value
        return values

    def plugin_sections(
        self, choice_field: str, plugins: dict[str, type[Plugin]]
    ) -> list[dict[str, Any]]:
        """For the template: each choice next to its plug-in's fields."""
        form: Any = self
        sections = []
        for choice in form[choice_field]:
            kind = str(choice.data["value"])
            plugin = plugins[kind]
            sections.append(
                {
                    "choice": choice,
                    "kind": kind,
                    # Plain values: a template would call a class.
                    "summary": plugin.summary(),
                    "fields": [
                        form[f"{kind}__{param.name}"]
                        for param in describe(plugin.Params)
                    ],
                }
            )
        return sections


def _project_options(user: User) -> list[tuple[int, str]]:
    return [(p.pk, p.name) for p in editable_projects(user).order_by("name")]


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
    scorer_specs = forms.JSONField(
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
        editable = editable_projects(user)
        datasets = (
            selectors.dataset_list(user=user)
            .filter(project__in=editable)
            .order_by("project__name", "name", "-version")
        )
        targets = (
            selectors.target_list(user=user)
            .filter(project__in=editable)
            .order_by("project__name", "name")
        )
        self.fields["dataset"].set_options(
            (d.pk, f"{d.project} / {d.name} v{d.version} ({d.item_count} items)")
            for d in datasets
        )
        self.fields["target"].set_options(
            (t.pk, f"{t.project} / {t.name} ({t.kind})") for t in targets
        )
        self.fields["scorers"].choices = [
            (kind, cls.label) for kind, cls in sorted(SCORERS.items())
        ]
        self.add_plugin_fields(SCORERS)  # type: ignore[arg-type]
        for param in option_params():
            self.fields[param.name] = param_field(param)
        self.error_paths = {"target_config": "target"}

    def clean_dataset(self) -> Dataset:
        return selectors.dataset_get(
            user=self.user, dataset_id=self.cleaned_data["dataset"]
        )

    def clean_target(self) -> Target:
        return selectors.target_get(
            user=self.user, target_id=self.cleaned_data["target"]
        )

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
            params = self.plugin_values(kind, SCORERS[kind], path=path)  # type: ignore[arg-type]
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
        return self.plugin_sections("scorers", SCORERS)  # type: ignore[arg-type]

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


class DatasetUploadForm(forms.Form):
    """Step one of an upload: the file and where it goes; its fields come next."""

    file = forms.FileField()
    project = PickField()
    name = forms.CharField(max_length=200)
    format = forms.ChoiceField(choices=DATASET_FORMATS, required=False)
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["project"].set_options(_project_options(user))

    def clean_project(self) -> Project:
        return selectors.project_get(
            user=self.user, project_id=self.cleaned_data["project"]
        )

    def stage_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``staging.upload_stage``."""
        data = self.cleaned_data
        return {
            "project": data["project"],
            "upload": data["file"],
            "name": data["name"],
            "format": data["format"] or None,
            "description": data["description"],
        }


NO_ID = ""
NO_EXPECTED = ""


class DatasetMappingForm(forms.Form):
    """Step two of an upload: which of the fields found is which."""

    id_field = forms.ChoiceField(label="Id", required=False)
    input_field = forms.ChoiceField(label="Input")
    expected_field = forms.ChoiceField(label="Expected answer", required=False)

    def __init__(self, *args: Any, preview: Preview, **kwargs: Any) -> None:
        guess = preview.guess
        kwargs.setdefault(
            "initial",
            {
                "id_field": guess.id if guess.id in preview.fields else NO_ID,
                "input_field": guess.input,
                "expected_field": guess.expected or NO_EXPECTED,
            },
        )
        super().__init__(*args, **kwargs)
        found = [
            (name, f"{name} ({count:,} of {preview.count:,})")
            for name, count in preview.fields.items()
        ]
        self.fields["id_field"].choices = [(NO_ID, "none: number the items"), *found]
        self.fields["input_field"].choices = found
        self.fields["expected_field"].choices = [
            (NO_EXPECTED, "none: the items have no expected answer"),
            *found,
        ]

    def import_arguments(self) -> dict[str, Any]:
        """The field mapping, as ``importers.dataset_import`` takes it."""
        data = self.cleaned_data
        return {
            "id_field": data["id_field"],
            "input_field": data["input_field"],
            "expected_field": data["expected_field"] or None,
        }


class TargetForm(PluginFieldsMixin, forms.Form):
    project = PickField()
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(widget=forms.RadioSelect)

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["project"].set_options(_project_options(user))
        self.fields["kind"].choices = [
            (kind, cls.label) for kind, cls in sorted(TARGETS.items())
        ]
        if "openai_chat" in TARGETS:
            self.fields["kind"].initial = "openai_chat"
        self.add_plugin_fields(TARGETS)  # type: ignore[arg-type]
        self.error_paths = {"config": "kind"}

    def clean_project(self) -> Project:
        return selectors.project_get(
            user=self.user, project_id=self.cleaned_data["project"]
        )

    def target_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``services.target_create``."""
        data = self.cleaned_data
        kind = data["kind"]
        return {
            "project": data["project"],
            "name": data["name"],
            "kind": kind,
            "config": self.plugin_values(kind, TARGETS[kind], path="config"),  # type: ignore[arg-type]
        }

    def kind_sections(self) -> list[dict[str, Any]]:
        sections = self.plugin_sections("kind", TARGETS)  # type: ignore[arg-type]
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

"""Forms of the dashboard pages.

Choices are scoped to the user: a select lists only what the user may use, and
a submitted id is resolved through the selectors, so an id from a project the
user cannot see is a 404 (as in the API), and one from a project the user may
only view reaches the service, which refuses it (403).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from runs import selectors
from runs.access import editable_projects
from runs.errors import InvalidInput
from runs.executor.options import RunOptions
from runs.importers import FORMATS, Preview
from runs.models import Dataset, Project, Target
from runs.scorers import REGISTRY as SCORERS
from runs.targets import REGISTRY as TARGETS

User = AbstractBaseUser | AnonymousUser

TARGET_CONFIG_EXAMPLES: dict[str, dict[str, Any]] = {
    "openai_chat": {
        "base_url": "https://api.openai.com/v1",
        "model": "gpt-4o-mini",
        "api_key_env": "OPENAI_API_KEY",
        "system_prompt": "",
        "prompt_template": "{input}",
        "temperature": 0,
        "max_tokens": 256,
    },
    "demo": {
        "min_latency_ms": 50,
        "max_latency_ms": 400,
        "accuracy": 0.8,
        "transient_error_rate": 0.03,
    },
    "python": {"callable": "runs.targets.examples.echo"},
}

FORMAT_LABELS = {"jsonl": "JSON Lines", "json": "JSON", "csv": "CSV", "yaml": "YAML"}
TARGET_CONFIG_EXAMPLES_JSON = {
    kind: json.dumps(example, indent=2)
    for kind, example in TARGET_CONFIG_EXAMPLES.items()
}
DEFAULT_OPTIONS = RunOptions()
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
    """Show a service's InvalidInput on the form field it names (or the form)."""
    # Run options are fields of the form itself; a target's configuration
    # belongs to the target picked.
    name = (exc.field or "").removeprefix("options.")
    field = name.split(".")[0].split("[")[0]
    field = {"target_config": "target"}.get(field, field)
    if exc.line is not None or getattr(exc, "record", None) is not None:
        field = "file"  # a problem inside an uploaded file, wherever it names
    form.add_error(field if field in form.fields else None, str(exc))


def _project_options(user: User) -> list[tuple[int, str]]:
    return [(p.pk, p.name) for p in editable_projects(user).order_by("name")]


class RunForm(forms.Form):
    name = forms.CharField(max_length=200, required=False)
    dataset = PickField(help_text="Newest versions first.")
    target = PickField()
    scorers = forms.MultipleChoiceField(
        choices=[(kind, cls.label) for kind, cls in sorted(SCORERS.items())],
        widget=forms.CheckboxSelectMultiple,
        initial=["exact_match"],
    )
    concurrency = forms.IntegerField(initial=DEFAULT_OPTIONS.concurrency)
    timeout_seconds = forms.FloatField(
        initial=DEFAULT_OPTIONS.timeout_seconds, label="Timeout (seconds per attempt)"
    )
    max_attempts = forms.IntegerField(initial=DEFAULT_OPTIONS.max_attempts)
    epochs = forms.IntegerField(initial=DEFAULT_OPTIONS.epochs)
    # Limits, all optional.
    deadline_seconds = forms.FloatField(
        required=False,
        label="Run deadline (seconds)",
        help_text="Stop after this long.",
    )
    rate_limit_rpm = forms.FloatField(
        required=False, label="Rate limit (requests a minute)"
    )
    retry_budget = forms.IntegerField(
        required=False, label="Retry budget", help_text="Retries for the whole run."
    )
    fail_fast_error_rate = forms.FloatField(
        required=False,
        label="Fail fast at error rate",
        help_text="0 to 1: stop when this fraction of items failed.",
    )
    fail_fast_min_items = forms.IntegerField(
        required=False,
        initial=DEFAULT_OPTIONS.fail_fast_min_items,
        label="… after at least N items",
    )
    adaptive_concurrency = forms.BooleanField(
        required=False,
        initial=True,
        label="Back off on 429s",
        help_text="Lower the concurrency on a burst of 429s, raise it back after.",
    )

    OPTION_FIELDS = (
        "concurrency",
        "timeout_seconds",
        "max_attempts",
        "epochs",
        "deadline_seconds",
        "rate_limit_rpm",
        "retry_budget",
        "fail_fast_error_rate",
        "fail_fast_min_items",
        "adaptive_concurrency",
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

    def clean_dataset(self) -> Dataset:
        return selectors.dataset_get(
            user=self.user, dataset_id=self.cleaned_data["dataset"]
        )

    def clean_target(self) -> Target:
        return selectors.target_get(
            user=self.user, target_id=self.cleaned_data["target"]
        )

    def run_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``services.run_create``."""
        data = self.cleaned_data
        return {
            "dataset": data["dataset"],
            "target": data["target"],
            "scorers": list(data["scorers"]),
            "name": data["name"],
            "options": {key: data[key] for key in self.OPTION_FIELDS},
        }


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


class TargetForm(forms.Form):
    project = PickField()
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(
        choices=[(kind, f"{cls.label} ({kind})") for kind, cls in TARGETS.items()]
    )
    config = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "class": "mono"}),
        initial=TARGET_CONFIG_EXAMPLES_JSON["openai_chat"],
        help_text="JSON. Secrets are never stored: name an environment variable.",
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["project"].set_options(_project_options(user))
        if "openai_chat" in TARGETS:
            self.fields["kind"].initial = "openai_chat"

    def clean_project(self) -> Project:
        return selectors.project_get(
            user=self.user, project_id=self.cleaned_data["project"]
        )

    def clean_config(self) -> dict[str, Any]:
        try:
            config = json.loads(self.cleaned_data["config"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            ) from None
        if not isinstance(config, dict):
            raise forms.ValidationError("must be a JSON object")
        return config

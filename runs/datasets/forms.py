"""The dataset forms: the upload and the mapping of its fields."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User

from runs.datasets.importers import FORMATS, Preview
from runs.models import Project
from runs.projects.selectors import project_get
from runs.web.forms import MultilineField, PickField, form_field, project_options

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


class DatasetUploadForm(forms.Form):
    """Step one of an upload: the file and where it goes; its fields come next."""

    file = forms.FileField()
    project = PickField()
    name = forms.CharField(max_length=200)
    format = forms.ChoiceField(choices=DATASET_FORMATS, required=False)
    description = MultilineField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        form_field(self, "project", PickField).set_options(project_options(user))

    def clean_project(self) -> Project:
        return project_get(user=self.user, project_id=self.cleaned_data["project"])

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
        form_field(self, "id_field", forms.ChoiceField).choices = [
            (NO_ID, "none: number the items"),
            *found,
        ]
        form_field(self, "input_field", forms.ChoiceField).choices = found
        form_field(self, "expected_field", forms.ChoiceField).choices = [
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

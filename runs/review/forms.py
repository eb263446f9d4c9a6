"""The page form that creates a review queue, for the sources the API takes."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from runs.models import ReviewSource, RubricKind
from runs.review.rubric import DEFAULT_PASS_AT
from runs.review.services import MAX_RATERS, NAME_MAX


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


class QueueForm(forms.Form):
    run = forms.IntegerField(min_value=1, label="Run", help_text="The ended run's id.")
    name = forms.CharField(
        max_length=NAME_MAX, help_text="Its scores are the scorer human:<name>."
    )
    description = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    source = forms.ChoiceField(choices=ReviewSource.choices, initial=ReviewSource.RUN)
    filters = forms.CharField(
        required=False,
        label="Results filter",
        help_text="A results filter: the run page's query, such as "
        "status=failed&scorer=exact_match.",
    )
    cluster = forms.CharField(required=False, help_text="A failure cluster's key.")
    sample_size = forms.IntegerField(
        required=False, min_value=1, help_text="A stratified sample: how many results."
    )
    sample_scorer = forms.CharField(
        required=False, help_text="The scorer whose verdicts are the strata."
    )
    seed = forms.IntegerField(required=False, min_value=0)
    other_run = forms.IntegerField(
        required=False, min_value=1, help_text="A comparison: the other run's id."
    )
    kind = forms.ChoiceField(
        choices=[("", "default"), *RubricKind.choices],
        required=False,
        label="Rubric",
        help_text="Default: pass or fail, and a preference for a comparison.",
    )
    labels = forms.CharField(
        required=False, help_text="Labels from a list: the labels, comma-separated."
    )
    multiple = forms.BooleanField(required=False, label="Several labels per item")
    criteria = forms.CharField(
        required=False, help_text="Named criteria, comma-separated (optional)."
    )
    pass_at = forms.FloatField(
        required=False,
        min_value=1,
        max_value=5,
        initial=DEFAULT_PASS_AT,
        help_text="A scale's mean passes from this.",
    )
    note = forms.BooleanField(
        required=False, initial=True, label="Reviewers may add a note"
    )
    show_expected = forms.BooleanField(
        required=False, initial=True, label="Show the expected answer"
    )
    raters = forms.IntegerField(min_value=1, max_value=MAX_RATERS, initial=1)
    reviewers = forms.CharField(
        required=False,
        help_text="Named reviewers (usernames, comma-separated); none: an open pool "
        "of the project's members.",
    )
    blind = forms.BooleanField(required=False, initial=True)

    # The service's argument paths, by the field they come from.
    error_paths = {
        "source_params.size": "sample_size",
        "source_params.scorer": "sample_scorer",
        "source_params.seed": "seed",
        "source_params.cluster": "cluster",
        "source_params": "filters",
        "rubric.kind": "kind",
        "rubric.labels": "labels",
        "rubric.criteria": "criteria",
        "rubric.pass_at": "pass_at",
        "rubric": "kind",
    }

    def source_params(self) -> dict[str, Any]:
        data = self.cleaned_data
        source = data["source"]
        if source == ReviewSource.FILTER:
            query = QueryDict(data["filters"].lstrip("?"))
            return {key: query.get(key) for key in query}
        if source == ReviewSource.CLUSTER:
            return {"cluster": data["cluster"]}
        if source == ReviewSource.SAMPLE:
            params: dict[str, Any] = {"size": data["sample_size"]}
            if data["sample_scorer"]:
                params["scorer"] = data["sample_scorer"]
            if data["seed"] is not None:
                params["seed"] = data["seed"]
            return params
        return {}

    def rubric(self) -> dict[str, Any]:
        data = self.cleaned_data
        rubric: dict[str, Any] = {
            "labels": _names(data["labels"]),
            "multiple": data["multiple"],
            "criteria": _names(data["criteria"]),
            "note": data["note"],
            "show_expected": data["show_expected"],
        }
        if data["kind"]:
            rubric["kind"] = data["kind"]
        if data["pass_at"] is not None:
            rubric["pass_at"] = data["pass_at"]
        return rubric

    def reviewer_names(self) -> list[str]:
        return _names(self.cleaned_data["reviewers"])

"""The evaluation form: the new-run form, with what an evaluation adds."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User

from runs.access import Action, projects_where
from runs.alerts.selectors import channel_list
from runs.executor.options import option_params
from runs.models import Evaluation, Project
from runs.results.forms import RunForm
from runs.results.selectors import run_get
from runs.scorers import REGISTRY as SCORERS
from runs.web.forms import JSONTextField, form_field


class EvaluationForm(RunForm):
    description = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    dataset_policy = forms.ChoiceField(
        choices=Evaluation.DatasetPolicy.choices,
        initial=Evaluation.DatasetPolicy.FIXED,
        widget=forms.RadioSelect,
        label="Dataset version",
    )
    baseline_policy = forms.ChoiceField(
        choices=Evaluation.BaselinePolicy.choices,
        initial=Evaluation.BaselinePolicy.PREVIOUS,
        widget=forms.RadioSelect,
        label="Baseline",
        help_text="What each run is compared with.",
    )
    baseline_run = forms.IntegerField(
        required=False, min_value=1, label="Baseline run id (fixed baseline)"
    )
    pass_rate_floors = JSONTextField(
        required=False,
        label="Pass-rate floors (JSON)",
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}),
        help_text='Scorer -> least pass rate, such as {"exact_match": 0.8}.',
    )
    channels = forms.TypedMultipleChoiceField(
        coerce=int,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Alert channels",
        help_text="Told when a run is worse than its baseline, falls below a "
        "floor, or fails (channels of the evaluation's project).",
    )

    def __init__(
        self,
        *args: Any,
        user: User,
        project: Project | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, user=user, **kwargs)
        channels = channel_list(user=user, project=project).filter(
            project__in=projects_where(user, Action.EDIT)
        )
        form_field(self, "channels", forms.ChoiceField).choices = [
            (c.pk, str(c) if project else f"{c.project} / {c}") for c in channels
        ]
        self.fields["name"].required = True
        if project is not None:  # an evaluation's own: its target may be ad hoc
            self.fields["target"].required = False
            self.fields["target"].help_text = (
                "A stored target; left empty on an evaluation of an ad-hoc "
                "target, it keeps its own."
            )
        self.error_paths["pass_rate_floors"] = "pass_rate_floors"

    def clean_target(self) -> Any:
        if self.cleaned_data.get("target") is None:
            return None
        return super().clean_target()

    def clean_baseline_run(self) -> Any:
        run_id = self.cleaned_data.get("baseline_run")
        if run_id is None:
            return None
        return run_get(user=self.user, run_id=run_id)

    def evaluation_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``services.evaluation_create`` (and update)."""
        data = self.cleaned_data
        arguments = self.run_arguments()
        if arguments["target"] is None:
            del arguments["target"]
        return arguments | {
            "description": data["description"],
            "dataset_policy": data["dataset_policy"],
            "baseline_policy": data["baseline_policy"],
            "baseline_run": data["baseline_run"],
            "pass_rate_floors": data.get("pass_rate_floors") or {},
            "channels": data.get("channels") or [],
        }


def _ticked(specs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Scorers the form's boxes can show (a kind once, by its own name, with
    no condition), and the others, for the JSON field."""
    kinds = [spec["kind"] for spec in specs]
    ticked, others = [], []
    for spec in specs:
        plain = spec["name"] == spec["kind"] and not spec.get("when")
        if plain and kinds.count(spec["kind"]) == 1 and spec["kind"] in SCORERS:
            ticked.append(spec)
        else:
            others.append(spec)
    return ticked, others


def evaluation_edit_form(
    data: Any | None, *, user: User, evaluation: Evaluation
) -> EvaluationForm:
    """The form bound to a stored evaluation."""
    ticked, others = _ticked(evaluation.scorers)
    initial: dict[str, Any] = {
        "name": evaluation.name,
        "description": evaluation.description,
        "dataset": evaluation.dataset_id,
        "dataset_policy": evaluation.dataset_policy,
        "target": evaluation.target_id,
        "scorers": [spec["kind"] for spec in ticked],
        "scorer_specs": others or None,
        "baseline_policy": evaluation.baseline_policy,
        "baseline_run": evaluation.baseline_run_id,
        "pass_rate_floors": evaluation.pass_rate_floors or None,
        "channels": [channel.pk for channel in evaluation.channels.all()],
    }
    for spec in ticked:
        for key, value in spec.get("params", {}).items():
            initial[f"{spec['kind']}__{key}"] = value
    for param in option_params():
        if param.name in evaluation.options:
            initial[param.name] = evaluation.options[param.name]
    return EvaluationForm(data, user=user, project=evaluation.project, initial=initial)


class ScheduleForm(forms.Form):
    cron = forms.CharField(
        max_length=100, initial="0 3 * * *", help_text="minute hour day month weekday"
    )
    timezone = forms.CharField(max_length=64, initial="UTC")

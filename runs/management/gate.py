"""The CI gate: a run against a baseline, scorer by scorer, as an exit code.

``evalrun --baseline RUN_ID`` and ``evalcompare BASELINE CANDIDATE`` share it.
The figures and verdicts are the comparison page's and API's
(``runs.compare.selectors.run_comparison``: paired tables, exact tests, Holm);
the gate only reads them. Under ``--fail-on worse`` (the default) it fails
when any scorer's verdict is ``worse``; under ``any-change`` when any is
``worse`` or ``better``; under ``never`` it only reports. A scorer with no
significant difference never fails it. A verdict of an LLM judge that is not
calibrated against people (``runs.review.calibration``) is said to be so;
under ``--require-calibrated`` it fails the gate whatever the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User

from runs.analysis.compare import (
    BETTER,
    WORSE,
    ScorerComparison,
    comparison_pairing,
    shared_scorers,
)
from runs.compare.selectors import run_comparison
from runs.errors import DomainError, InvalidInput, NotFound
from runs.management.evalrun_cli import BadInput
from runs.management.gate_flags import DEFAULT_FAIL_ON
from runs.models import Run
from runs.results.selectors import run_get
from runs.review.calibration import Calibration, verdict_calibration

# The verdicts each of --fail-on's choices (gate_flags.FAIL_ON_CHOICES) fails on.
FAIL_ON = {
    "worse": frozenset({WORSE}),
    "any-change": frozenset({WORSE, BETTER}),
    "never": frozenset[str](),
}


def gate_run(*, user: User, run_id: int, role: str) -> Run:
    """A run the gate may compare: it exists, ``user`` may see it, it has ended.

    ``role`` (``baseline``, ``candidate``) names it in the error.
    """
    try:
        run = run_get(user=user, run_id=run_id)
    except NotFound:
        if Run.objects.filter(pk=run_id).exists():
            raise BadInput(
                f"{role} run {run_id} is in a project user "
                f"{user.get_username()!r} is not a member of (--user chooses "
                "another)"
            ) from None
        raise BadInput(f"no {role} run {run_id}") from None
    if not run.is_final:
        raise BadInput(
            f"{role} run {run_id} is still {run.status}: compare with a run that "
            "has ended"
        )
    return run


def gate_admit(*, baseline: Run, candidate: Run) -> None:
    """What the comparison requires of two runs, checked before a run is made:
    one dataset (any of its versions, in one project) and a scorer in common.

    ``candidate`` may be unsaved (its project, dataset and scorers set).
    """
    try:
        comparison_pairing(baseline=baseline, candidates=[candidate])
    except InvalidInput as exc:
        if (baseline.project_id, baseline.dataset.name) == (
            candidate.project_id,
            candidate.dataset.name,
        ):
            raise BadInput(f"--baseline: {exc.message}") from None
        raise BadInput(
            f"--baseline: run {baseline.pk} is over dataset "
            f"{baseline.dataset.name!r} in project {baseline.project.name!r}, "
            f"{run_label(candidate)} over {candidate.dataset.name!r} in project "
            f"{candidate.project.name!r}: runs are compared over one dataset "
            "(any of its versions) in one project"
        ) from None
    if not shared_scorers(baseline, candidate):
        raise BadInput(
            f"--baseline: run {baseline.pk} has no scorer of {run_label(candidate)}'s "
            f"({', '.join(baseline.scorer_names) or 'none'} against "
            f"{', '.join(candidate.scorer_names) or 'none'}): nothing to compare"
        )


def run_label(run: Run) -> str:
    return "this run" if run.pk is None else f"run {run.pk}"


@dataclass(frozen=True, slots=True)
class Gate:
    baseline: Run
    candidate: Run
    fail_on: str
    rows: list[ScorerComparison]  # the candidate's, one per shared scorer
    require_calibrated: bool = False
    # Of the rows' scorers that are LLM judges, by scorer.
    calibrations: dict[str, Calibration] = field(default_factory=dict)

    @property
    def uncalibrated(self) -> dict[str, str]:
        """The judges the verdicts rest on that are not calibrated, and why."""
        return {
            name: c.gap for name, c in self.calibrations.items() if not c.calibrated
        }

    def fails_calibration(self, row: ScorerComparison) -> bool:
        return self.require_calibrated and row.scorer in self.uncalibrated

    def fails(self, row: ScorerComparison) -> bool:
        return row.verdict in FAIL_ON[self.fail_on] or self.fails_calibration(row)

    @property
    def failed(self) -> bool:
        return any(self.fails(row) for row in self.rows)

    @property
    def verdicts(self) -> dict[str, str]:
        return {row.scorer: row.verdict for row in self.rows}

    def as_json(self) -> dict[str, Any]:
        """The ``gate`` object of ``--json``: exactly these keys."""
        return {
            "baseline": self.baseline.pk,
            "verdicts": self.verdicts,
            "uncalibrated_judges": self.uncalibrated,
            "failed": self.failed,
        }


def gate_evaluate(
    *,
    user: User,
    baseline: Run,
    candidate: Run,
    fail_on: str | None,
    require_calibrated: bool | None = False,
) -> Gate:
    """The comparison of ``candidate`` with ``baseline``, as the page shows it,
    with the calibration of each LLM judge the verdicts rest on (the
    candidate's, else the baseline's when only it has people's verdicts)."""
    gate_admit(baseline=baseline, candidate=candidate)
    try:
        comparison = run_comparison(
            user=user, baseline_id=baseline.pk, candidate_ids=[candidate.pk]
        )
    except DomainError as exc:
        raise BadInput(str(exc)) from None
    rows = [row for row in comparison.scorers if row.candidate == candidate.pk]
    runs = [comparison.candidates[0], comparison.baseline]
    calibrations = {}
    for row in rows:
        found = verdict_calibration(runs, row.scorer)
        if found is not None:
            calibrations[row.scorer] = found
    return Gate(
        baseline=comparison.baseline,
        candidate=comparison.candidates[0],
        fail_on=fail_on or DEFAULT_FAIL_ON,
        rows=rows,
        require_calibrated=bool(require_calibrated),
        calibrations=calibrations,
    )


# -- figures as text, shared by the terminal, Markdown and JUnit ------------------


def figure(row: ScorerComparison, which: str) -> str:
    """The baseline's or candidate's headline figure of a row."""
    if row.measure == "mean":
        value = row.baseline_mean if which == "baseline" else row.candidate_mean
        return "n/a" if value is None else f"{value:.3f}"
    rate = row.baseline_pass_rate if which == "baseline" else row.candidate_pass_rate
    return "n/a" if rate is None else f"{rate:.1%}"


def change(value: float, measure: str) -> str:
    if measure == "mean":
        return f"{value:+.3f}"
    return f"{value * 100:+.1f} pp"


def delta_text(row: ScorerComparison) -> str:
    """``+5.0 pp [-1.2, +11.3]`` (percentage points), or the means' difference."""
    if row.delta is None:
        return "n/a"
    text = change(row.delta, row.measure)
    if row.delta_ci is not None:
        low, high = row.delta_ci
        scale = 1 if row.measure == "mean" else 100
        digits = 3 if row.measure == "mean" else 1
        text += f" [{low * scale:+.{digits}f}, {high * scale:+.{digits}f}]"
    return text


def p_text(row: ScorerComparison) -> str:
    if row.p_value is None:
        return "n/a"
    text = f"{row.p_value:.3g}"
    if row.p_value_adjusted is not None and row.p_value_adjusted != row.p_value:
        text += f" (Holm {row.p_value_adjusted:.3g})"
    return text


def verdict_text(verdict: str) -> str:
    return verdict.replace("_", " ")


def row_line(row: ScorerComparison) -> str:
    return (
        f"{row.scorer}: {figure(row, 'baseline')} -> {figure(row, 'candidate')}, "
        f"delta {delta_text(row)}, p {p_text(row)}: {verdict_text(row.verdict)}"
    )


def gate_lines(gate: Gate) -> list[str]:
    """The verdicts for the terminal: a heading, a line per scorer, the outcome."""
    lines = [
        f"run {gate.candidate.pk} against baseline run {gate.baseline.pk} "
        f"({len(gate.rows)} scorer{'s' if len(gate.rows) != 1 else ''} over the "
        "paired items; 95% intervals, Holm-adjusted p-values):"
    ]
    uncalibrated = gate.uncalibrated
    for row in gate.rows:
        lines.append(f"  {row_line(row)}")
        if row.scorer in uncalibrated:
            lines.append(f"    {calibration_note(row.scorer, uncalibrated)}")
    failing = [row.scorer for row in gate.rows if gate.fails(row)]
    flags = f"--fail-on {gate.fail_on}" + (
        ", --require-calibrated" if gate.require_calibrated else ""
    )
    if failing:
        lines.append(f"gate failed ({flags}): {', '.join(failing)}")
    else:
        lines.append(f"gate passed ({flags})")
    return lines


def calibration_note(scorer: str, uncalibrated: dict[str, str]) -> str:
    return (
        f"the verdict rests on the LLM judge {scorer}, not calibrated against "
        f"people: {uncalibrated[scorer]}"
    )

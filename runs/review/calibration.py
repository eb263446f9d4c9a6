"""Whether a run's LLM judge is calibrated: its verdicts against people's.

People's verdicts are the run's scores named ``human:<queue>`` (a review
queue's consensus, passed or failed). A judge scorer J of run R is measured
against each human scorer H over the results both gave a verdict, and is
calibrated when Cohen's kappa reaches the project's
``judge_kappa_threshold`` over at least ``judge_min_items`` results.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from runs.analysis.agreement import BOOTSTRAP
from runs.analysis.judge_agreement import (
    JudgeAgreement,
    calibration_gap,
    judge_against_people,
)
from runs.models import Run, Score

HUMAN_PREFIX = "human:"
JUDGE_KINDS = frozenset({"llm_judge"})


@dataclass(frozen=True, slots=True)
class Calibration:
    """A judge scorer against one human scorer of the same run.

    ``human`` and ``agreement`` are None when the run has no people's verdicts;
    ``gap`` says why the judge is not calibrated ("" when it is).
    """

    judge: str
    human: str | None
    agreement: JudgeAgreement | None
    kappa_threshold: float
    min_items: int
    calibrated: bool
    gap: str


def judge_scorers(run: Run) -> list[str]:
    """The run's scorers that are LLM judges, by the name their scores carry."""
    return [
        spec.get("name") or spec.get("kind")
        for spec in run.scorers
        if spec.get("kind") in JUDGE_KINDS
    ]


def human_scorers(run: Run) -> list[str]:
    """The names of the run's human scorers (``human:<queue>``), sorted."""
    names = (
        Score.objects.filter(result__run=run, scorer__startswith=HUMAN_PREFIX)
        .values_list("scorer", flat=True)
        .distinct()
    )
    return sorted(set(names))


def verdicts_by_result(
    run: Run, scorers: list[str]
) -> dict[str, dict[int, bool | None]]:
    """Each scorer's verdict (passed) per result id of the run."""
    out: dict[str, dict[int, bool | None]] = defaultdict(dict)
    rows = Score.objects.filter(result__run=run, scorer__in=scorers).values_list(
        "scorer", "result_id", "passed"
    )
    for scorer, result_id, passed in rows:
        out[scorer][result_id] = passed
    return out


def calibration_of(
    run: Run,
    judge: str,
    human: str | None,
    verdicts: dict[str, dict[int, bool | None]],
    *,
    replicates: int = BOOTSTRAP,
) -> Calibration:
    """The judge against one human scorer, from verdicts already read."""
    project = run.project
    threshold, min_items = project.judge_kappa_threshold, project.judge_min_items
    if human is None:
        return Calibration(
            judge,
            None,
            None,
            threshold,
            min_items,
            False,
            "no people's verdicts (human: scores) on this run",
        )
    judged, labelled = verdicts.get(judge, {}), verdicts.get(human, {})
    shared = sorted(judged.keys() & labelled.keys())
    agreement = judge_against_people(
        [judged[r] for r in shared],
        [labelled[r] for r in shared],
        replicates=replicates,
        seed=run.pk or 0,
    )
    gap = calibration_gap(agreement, threshold, min_items)
    return Calibration(judge, human, agreement, threshold, min_items, not gap, gap)


def run_judge_agreement(run: Run, *, replicates: int = BOOTSTRAP) -> list[Calibration]:
    """Every judge scorer of the run against every human scorer of it."""
    judges = judge_scorers(run)
    if not judges:
        return []
    humans = human_scorers(run)
    verdicts = verdicts_by_result(run, judges + humans)
    if not humans:
        return [calibration_of(run, judge, None, verdicts) for judge in judges]
    return [
        calibration_of(run, judge, human, verdicts, replicates=replicates)
        for judge in judges
        for human in humans
    ]


def judge_calibration(
    run: Run, scorer_name: str, *, replicates: int = 0
) -> Calibration | None:
    """Whether the run's scorer ``scorer_name`` is a calibrated judge.

    None when the scorer is not an LLM judge (nothing to calibrate). With
    several human scorers, the one that judged the most results with the
    judge is used (the first by name on a tie): a calibration over more
    items says more.
    """
    if scorer_name not in judge_scorers(run):
        return None
    humans = human_scorers(run)
    if not humans:
        return calibration_of(run, scorer_name, None, {})
    verdicts = verdicts_by_result(run, [scorer_name, *humans])
    judged = {r for r, v in verdicts.get(scorer_name, {}).items() if v is not None}

    def overlap(human: str) -> int:
        labelled = verdicts.get(human, {})
        return sum(1 for r in judged if labelled.get(r) is not None)

    best = max(humans, key=overlap)  # humans are sorted: the first on a tie
    return calibration_of(run, scorer_name, best, verdicts, replicates=replicates)


def verdict_calibration(runs: Sequence[Run], scorer_name: str) -> Calibration | None:
    """The calibration a verdict over ``runs`` rests on (a comparison, a
    ranking): that of the first of the runs with people's verdicts, else the
    first's; None when the scorer is not an LLM judge of any of them."""
    judged = []
    for run in runs:
        found = judge_calibration(run, scorer_name)
        if found is not None and found.human is not None:
            return found
        if found is not None:
            judged.append(found)
    return judged[0] if judged else None


@dataclass(frozen=True, slots=True)
class JudgeNote:
    """A verdict that rests on an LLM judge not calibrated against people."""

    scorer: str
    gap: str


def uncalibrated_judges(runs: Sequence[Run], scorers: Sequence[str]) -> list[JudgeNote]:
    """The scorers among ``scorers`` whose verdicts over ``runs`` rest on an
    LLM judge that is not calibrated, and why."""
    notes = []
    for scorer in dict.fromkeys(scorers):
        found = verdict_calibration(runs, scorer)
        if found is not None and not found.calibrated:
            notes.append(JudgeNote(scorer, found.gap))
    return notes

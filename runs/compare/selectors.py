"""Reads for comparing runs: the runs asked for, their comparison, the choices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import F, QuerySet, Subquery
from django.urls import reverse
from django.utils.http import urlencode

from runs.analysis.compare import Comparison, ScorerComparison, compare_runs_cached
from runs.analysis.compare import shared_scorers as compare_shared_scorers
from runs.compare.planner import (
    ALPHA,
    POWER,
    Plan,
    PlanInput,
    mcnemar_power,
    plan_compute,
)
from runs.errors import InvalidInput
from runs.models import Membership, Run
from runs.records import compiled
from runs.records.compiled import Args
from runs.results.selectors import run_get, run_list

MAX_COMPARED_CANDIDATES = 10


def run_ids_parse(text: str | None, *, field: str) -> list[int]:
    """Run ids from ``1,2,3``; InvalidInput naming ``field`` if that is not it."""
    parts = [part.strip() for part in (text or "").split(",") if part.strip()]
    if not parts:
        raise InvalidInput("give one or more run ids, separated by commas", field=field)
    if len(parts) > MAX_COMPARED_CANDIDATES:
        raise InvalidInput(
            f"at most {MAX_COMPARED_CANDIDATES} runs at once", field=field
        )
    ids = []
    for part in parts:
        if not (part.isascii() and part.isdigit() and len(part) <= 19):
            raise InvalidInput(f"{part!r} is not a run id", field=field)
        number = int(part)
        if not 1 <= number <= 2**63 - 1:
            raise InvalidInput(f"{part!r} is not a run id", field=field)
        ids.append(number)
    return ids


def compare_url(baseline: int, candidates: list[int]) -> str:
    """The comparison page of a baseline and its candidates (the query that
    ``run_ids_parse`` reads back)."""
    query = urlencode(
        {"baseline": str(baseline), "candidates": ",".join(map(str, candidates))}
    )
    return f"{reverse('runs:compare')}?{query}"


def run_comparison(
    *, user: User, baseline_id: int, candidate_ids: list[int]
) -> Comparison:
    """The baseline against each candidate; every run must be the user's to see."""
    baseline = run_get(user=user, run_id=baseline_id)
    candidates = [run_get(user=user, run_id=run_id) for run_id in candidate_ids]
    return compare_runs_cached(baseline=baseline, candidates=candidates)


def comparison_pair(
    *, user: User, baseline_id: int, candidate_id: int, scorer: str
) -> tuple[Run, Run]:
    """Two runs the user may see that share ``scorer``: one comparison's items."""
    baseline = run_get(user=user, run_id=baseline_id)
    candidate = run_get(user=user, run_id=candidate_id)
    shared = compare_shared_scorers(baseline, candidate)
    if scorer not in shared:
        raise InvalidInput(
            f"must be a scorer of both runs ({', '.join(shared) or 'none'}), "
            f"not {scorer!r}",
            field="scorer",
        )
    return baseline, candidate


def run_compare_choices(*, user: User, run: Run, limit: int = 20) -> list[Run]:
    """Other runs over the run's dataset (any version), newest first
    (``run_compare_choices_key``: what a page shows of them)."""
    return list(
        run_list(user=user, project_id=run.project_id)
        .filter(dataset__name=run.dataset.name)
        .exclude(pk=run.pk)
        .only(
            "name",
            "status",
            "target_name",
            "created_at",
            "project",
            "dataset",
            "dataset__name",
            "dataset__version",
            "project__name",
        )
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass(frozen=True, slots=True)
class PlanAsked:
    """What a planner's user set; the rest comes from the comparison shown."""

    delta: float | None = None
    pass_rate: float | None = None
    discordance: float | None = None
    m: int | None = None  # Holm's family: comparisons
    power: float = POWER
    alpha: float = ALPHA


@dataclass(frozen=True, slots=True)
class ComparisonPlan:
    plan: Plan
    candidate: int | None
    scorer: str | None
    paired: int | None  # the comparison's paired items
    mde: float | None  # the comparison's own minimum detectable effect
    power_at_paired: float | None  # exact power the comparison had for delta

    def as_dict(self) -> dict[str, Any]:
        """The plan's figures and the comparison's, flat (the API's answer)."""
        figures = {name: getattr(self.plan, name) for name in Plan.__slots__}
        mine = {name: getattr(self, name) for name in self.__slots__}
        return figures | mine


def _planned_row(
    comparison: Comparison, candidate: int | None, scorer: str | None
) -> ScorerComparison:
    candidate = candidate or comparison.candidates[0].pk
    rows = [row for row in comparison.scorers if row.candidate == candidate]
    if not rows:
        raise InvalidInput(f"run {candidate} is not a candidate", field="candidate")
    row = next((row for row in rows if row.scorer == scorer), None)
    if scorer and row is None:
        raise InvalidInput(f"no scorer {scorer!r} in this comparison", field="scorer")
    row = row or rows[0]
    if row.measure != "pass_rate" or not row.paired:
        raise InvalidInput(
            f"the planner covers pass/fail scorers with paired items; {row.scorer!r} "
            "is not one here",
            field="scorer",
        )
    return row


def comparison_plan(
    *,
    comparison: Comparison | None,
    candidate: int | None = None,
    scorer: str | None = None,
    asked: PlanAsked,
) -> ComparisonPlan:
    """Items needed to detect ``asked.delta`` (``planner``), each figure not
    asked for taken from the comparison's row of (candidate, scorer): its
    baseline pass rate, its discordance, its delta, its Holm family's size."""
    row = _planned_row(comparison, candidate, scorer) if comparison else None
    delta, pass_rate, discordance = asked.delta, asked.pass_rate, asked.discordance
    comparisons = asked.m
    if row is not None:
        pass_rate = row.baseline_pass_rate if pass_rate is None else pass_rate
        if discordance is None:
            observed = (row.regressions + row.improvements) / row.paired
            # An effect needs at least as many discordant items as itself.
            discordance = max(observed, abs(delta or row.delta or 0))
        delta = delta if delta is not None else (row.delta or None)
        if comparisons is None and comparison is not None:
            tested = [r for r in comparison.scorers if r.p_value is not None]
            comparisons = max(len(tested), 1)
    if delta is None:
        raise InvalidInput("give the difference of pass rates to detect", field="delta")
    if pass_rate is None:
        raise InvalidInput("give the baseline's pass rate", field="pass_rate")
    plan = plan_compute(
        PlanInput(
            pass_rate=pass_rate,
            delta=delta,
            discordance=discordance,
            comparisons=comparisons or 1,
            power=asked.power,
            alpha=asked.alpha,
        )
    )
    return ComparisonPlan(
        plan=plan,
        candidate=row.candidate if row else None,
        scorer=row.scorer if row else None,
        paired=row.paired if row else None,
        mde=row.mde if row else None,
        power_at_paired=mcnemar_power(
            items=row.paired,
            discordance=plan.discordance,
            delta=abs(plan.delta),
            level=plan.level,
        )
        if row
        else None,
    )


def run_plan(
    *,
    user: User,
    baseline_id: int | None,
    candidates: str | None,
    candidate: int | None,
    scorer: str | None,
    asked: PlanAsked,
) -> ComparisonPlan:
    """``comparison_plan`` over the comparison of ``baseline_id`` and
    ``candidates`` (``1,2``) when given, every run the user's to see."""
    comparison = None
    if baseline_id is not None:
        comparison = run_comparison(
            user=user,
            baseline_id=baseline_id,
            candidate_ids=run_ids_parse(candidates, field="candidates"),
        )
    return comparison_plan(
        comparison=comparison, candidate=candidate, scorer=scorer, asked=asked
    )


# The planner's form on the comparison page: (query name, field, bounds).
PLAN_FIELDS = (
    ("plan_delta", "delta", -1.0, 1.0),
    ("plan_m", "m", 1, 10_000),
    ("plan_power", "power", 0.01, 0.99),
)


def plan_asked_parse(params: Mapping[str, str]) -> PlanAsked:
    """The planner form's values (blank: the comparison's); InvalidInput naming
    the field of a value that is not a number within its bounds."""
    values: dict[str, Any] = {}
    for name, field, low, high in PLAN_FIELDS:
        text = (params.get(name) or "").strip()
        if not text:
            continue
        kind = int if isinstance(low, int) else float
        try:
            value = kind(text)
        except ValueError:
            raise InvalidInput(f"{text!r} is not a number", field=name) from None
        if not (low <= value <= high) or value != value:
            raise InvalidInput(f"must lie in [{low}, {high}]", field=name)
        values[field] = value
    return PlanAsked(**values)


def _compare_choices(args: Args) -> QuerySet[Run, Any]:
    # run_compare_choices, as the columns a page shows of each run.
    run_id = args.integer("run_id")
    run = Run.objects.filter(pk=run_id)
    members = Membership.objects.filter(user_id=args.integer("user_id"))
    return (
        Run.objects.filter(project_id__in=members.values("project_id"))
        .filter(
            project_id=Subquery(run.values("project_id")[:1]),
            dataset__name=Subquery(run.values("dataset__name")[:1]),
        )
        .exclude(pk=run_id)
        .order_by("-created_at", "-id")
        .values(
            "id",
            "name",
            "status",
            "target_name",
            "created_at",
            dataset_name=F("dataset__name"),
            dataset_version=F("dataset__version"),
        )
    )


def run_compare_choices_key(*, user_id: int, run_id: int, limit: int) -> Any:
    """What ``run_compare_choices`` gives a page to show (each run's id, name,
    status, target, creation and dataset), as the database hands it: a part of
    a cached page's key, read in one compiled statement."""
    names, rows = compiled.fetch(
        compiled.statement("compare-choices", _compare_choices, sliced=True),
        {"user_id": user_id, "run_id": run_id},
        limit=limit,
        convert=False,
    )
    return names, tuple(rows)

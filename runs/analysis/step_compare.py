"""Two runs' trajectories compared item by item: steps and cost per item.

Items are paired as the comparison pairs them: the same item when both runs
share a dataset version, else the same external id. An item's figure is its
mean over its results (epochs): steps (a result without a trajectory has
0), cost (results without a cost left out; an item with none is unpaired
for cost). Each figure is tested with Wilcoxon's signed-rank test over the
paired differences (two-sided; zero differences dropped, as Wilcoxon does;
scipy's exact distribution for up to 50 pairs without ties, the normal
approximation otherwise).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from django.db.models import Count
from scipy import stats

from runs.models import Result, Run, Step


@dataclass(frozen=True, slots=True)
class PairedFigure:
    measure: str  # steps or cost
    pairs: int
    baseline_mean: float | None
    candidate_mean: float | None
    mean_difference: float | None  # candidate - baseline
    p_value: float | None  # None: no non-zero difference to test


@dataclass(frozen=True, slots=True)
class StepComparison:
    baseline: int
    candidate: int
    paired_by: str  # item or external_id
    figures: list[PairedFigure]


def _per_item(run: Run, key: str) -> tuple[dict[str, float], dict[str, float]]:
    """Mean steps and mean cost per item of ``run``, by pairing key."""
    rows = (
        Result.objects.filter(run=run)
        .annotate(step_count=Count("steps"))
        .values_list(key, "step_count", "cost")
    )
    steps: dict[str, list[float]] = defaultdict(list)
    costs: dict[str, list[float]] = defaultdict(list)
    for item, count, cost in rows:
        steps[str(item)].append(float(count))
        if cost is not None:
            costs[str(item)].append(float(cost))
    return (
        {item: float(np.mean(v)) for item, v in steps.items()},
        {item: float(np.mean(v)) for item, v in costs.items()},
    )


def paired_figure(
    measure: str, base: dict[str, float], cand: dict[str, float]
) -> PairedFigure:
    """The items both have, their means, and Wilcoxon's test of the differences."""
    shared = sorted(set(base) & set(cand))
    if not shared:
        return PairedFigure(measure, 0, None, None, None, None)
    b = np.array([base[item] for item in shared])
    c = np.array([cand[item] for item in shared])
    differences = c - b
    p_value = None
    if np.any(differences != 0):
        p_value = float(stats.wilcoxon(differences, zero_method="wilcox").pvalue)
    return PairedFigure(
        measure,
        len(shared),
        float(b.mean()),
        float(c.mean()),
        float(differences.mean()),
        p_value,
    )


def compare_steps(baseline: Run, candidate: Run) -> StepComparison:
    """Steps and cost per item of ``candidate`` against ``baseline``."""
    same = baseline.dataset_id == candidate.dataset_id
    key = "item_id" if same else "item__external_id"
    base_steps, base_costs = _per_item(baseline, key)
    cand_steps, cand_costs = _per_item(candidate, key)
    return StepComparison(
        baseline=baseline.pk,
        candidate=candidate.pk,
        paired_by="item" if same else "external_id",
        figures=[
            paired_figure("steps", base_steps, cand_steps),
            paired_figure("cost", base_costs, cand_costs),
        ],
    )


def runs_with_steps(runs: Iterable[Run]) -> set[int]:
    """The ids of those of ``runs`` with at least one stored step (a query
    each, stopping at its first step)."""
    return {run.pk for run in runs if Step.objects.filter(result__run=run).exists()}


def step_comparisons(baseline: Run, candidates: Sequence[Run]) -> list[StepComparison]:
    """Each candidate's steps and cost per item against ``baseline``, for
    the candidates of which either run has steps (none: no trajectories)."""
    with_steps = runs_with_steps([baseline, *candidates])
    return [
        compare_steps(baseline, candidate)
        for candidate in candidates
        if baseline.pk in with_steps or candidate.pk in with_steps
    ]

"""Failing results grouped by their failing step: the tool and its masked error.

A result fails when its call failed or timed out, or one of its scores
failed or errored (``signatures.FAILING_SCORE``). Its failing step is the
first tool call of its trajectory that ended in an error: where the agent
first went wrong. Failing results whose trajectory has no failed tool call
are counted apart. Errors are masked as results' are (``signatures.mask``):
the same failure, whatever ids and numbers it quotes, is one cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef, Q

from runs.analysis.step_compare import runs_with_steps
from runs.models import Result, Run, Score, Step
from runs.records.signatures import FAILING_SCORE, READ_LIMIT, mask

ITEMS_PER_CLUSTER = 10


@dataclass(slots=True)
class StepCluster:
    tool: str
    error_type: str
    pattern: str  # the masked error
    results: int = 0
    # The first results in it: (item index, epoch, result id), in dataset order.
    examples: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FailingSteps:
    failing: int  # failing results of the run
    without_failed_step: int  # of them, those with no failed tool call
    clusters: list[StepCluster]  # biggest first


def failing_results(run: Run) -> Q:
    """Results of ``run`` that failed, as a filter of results."""
    failing_score = Score.objects.filter(FAILING_SCORE, result=OuterRef("pk"))
    return Q(run=run) & (~Q(status=Result.Status.SUCCEEDED) | Q(Exists(failing_score)))


def failing_step_clusters(
    run: Run, *, items_per_cluster: int = ITEMS_PER_CLUSTER
) -> FailingSteps:
    """The run's failing results grouped by their first failed tool call."""
    failing = Result.objects.filter(failing_results(run))
    steps = (
        Step.objects.filter(result__in=failing.values("pk"), kind=Step.Kind.TOOL)
        .filter(~Q(error="") | ~Q(error_type=""))
        .order_by("result__item_index", "result__epoch", "result_id", "index")
        .values_list(
            "result_id", "result__item_index", "result__epoch", "name",
            "error_type", "error",
        )
    )  # fmt: skip
    clusters: dict[tuple[str, str, str], StepCluster] = {}
    seen: set[int] = set()
    for result_id, item_index, epoch, tool, error_type, error in steps.iterator():
        if result_id in seen:
            continue  # only its first failed call
        seen.add(result_id)
        pattern = mask(error[:READ_LIMIT])
        key = (tool, error_type, pattern)
        cluster = clusters.setdefault(key, StepCluster(tool, error_type, pattern))
        cluster.results += 1
        if len(cluster.examples) < items_per_cluster:
            cluster.examples.append((item_index, epoch, result_id))
    total = failing.count()
    ordered = sorted(clusters.values(), key=lambda c: (-c.results, c.tool, c.pattern))
    return FailingSteps(total, total - len(seen), ordered)


def run_failing_steps(run: Run) -> FailingSteps | None:
    """The run's failing step clusters; None when it has no steps at all."""
    return failing_step_clusters(run) if runs_with_steps([run]) else None

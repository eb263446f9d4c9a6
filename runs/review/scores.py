"""A queue's consensus as scores of its run: the scorer ``human:<queue>``.

Attaching a queue lists its scorers on the run (``Run.human_scorers``) and
records a scoring pass for them; each label saved writes the consensus of its
item's raters to the item's result (and, for a comparison, the mirrored one
to the other run's), so that the summary, comparisons, clusters, filters and
the export read it as any other score. Every write moves the run's
``results_version``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import F
from django.utils import timezone

from runs.models import (
    ReviewAdjudication,
    ReviewItem,
    ReviewLabel,
    ReviewQueue,
    Run,
    Score,
    ScoringPass,
)
from runs.records.signatures import score_signature
from runs.records.versions import results_changed
from runs.rescore.selectors import initial_pass
from runs.review.rubric import Consensus, adjudicated, consensus, mirrored

HUMAN_KIND = "human"


def scorer_names(queue: ReviewQueue) -> list[str]:
    """The queue's scorer, then one per criterion (``human:<queue>/<criterion>``)."""
    criteria = queue.rubric.get("criteria", [])
    return [queue.scorer_name, *(f"{queue.scorer_name}/{c}" for c in criteria)]


def _spec(queue: ReviewQueue, name: str) -> dict[str, Any]:
    return {"name": name, "kind": HUMAN_KIND, "params": {"queue": queue.pk}}


def _runs(queue: ReviewQueue) -> list[Run]:
    ids = [queue.run_id] + ([queue.other_run_id] if queue.other_run_id else [])
    return list(
        Run.objects.select_for_update(no_key=True).filter(pk__in=ids).order_by("pk")
    )


def scorer_attach(*, queue: ReviewQueue, user: User | None) -> None:
    """List the queue's scorers on its run(s), with a scoring pass for them."""
    names = scorer_names(queue)
    total = queue.items.count()
    now = timezone.now()
    for run in _runs(queue):
        if not ScoringPass.objects.filter(run=run).exists():
            initial_pass(run).save()
        run.human_scorers = [*run.human_scorers, *names]
        results_changed(run)
        run.save(update_fields=["human_scorers", "revision"])
        ScoringPass.objects.create(
            run=run,
            scorers=[_spec(queue, name) for name in names],
            status=ScoringPass.Status.COMPLETED,
            total=total,
            user=user,
            created_at=now,
            started_at=now,
            finished_at=now,
        )


def scorer_detach(*, queue: ReviewQueue) -> None:
    """Take the queue's scorers and their scores off its run(s)."""
    names = scorer_names(queue)
    for run in _runs(queue):
        Score.objects.filter(result__run=run, scorer__in=names).delete()
        run.human_scorers = [n for n in run.human_scorers if n not in names]
        results_changed(run)
        run.save(update_fields=["human_scorers", "revision"])


def _write(result_id: int, name: str, found: Consensus | None) -> int:
    """Store (or remove) one consensus score; +1 / -1 / 0 scores stored."""
    if found is None:
        deleted, _ = Score.objects.filter(result_id=result_id, scorer=name).delete()
        return -deleted
    # A failing consensus is grouped with its like in the run's clusters.
    signature = score_signature(passed=found.passed, reason=found.reason, error="")
    _, created = Score.objects.update_or_create(
        result_id=result_id,
        scorer=name,
        defaults={
            "value": found.value,
            "passed": found.passed,
            "reason": found.reason,
            "error": "",
            "skipped": False,
            "reason_signature": signature.signature if signature else "",
        },
    )
    return int(created)


def item_consensus(queue: ReviewQueue, review_item: ReviewItem) -> dict[str, Any]:
    """The consensus of the item's submitted labels, by scorer name."""
    rubric = queue.rubric
    settled = (
        ReviewAdjudication.objects.filter(review_item=review_item)
        .order_by("-changed_at", "-pk")
        .values_list("value", "criteria")
        .first()
    )
    if settled is not None:
        value, criteria = settled
        found = {queue.scorer_name: adjudicated(rubric, value)}
        for criterion in rubric.get("criteria", []):
            name = f"{queue.scorer_name}/{criterion}"
            found[name] = adjudicated(rubric, criteria.get(criterion))
        return found
    labels = list(
        ReviewLabel.objects.filter(
            review_item=review_item, submitted_at__isnull=False
        ).values_list("value", "criteria")
    )
    found = {queue.scorer_name: consensus(rubric, [value for value, _ in labels])}
    for criterion in rubric.get("criteria", []):
        values = [criteria.get(criterion) for _, criteria in labels]
        found[f"{queue.scorer_name}/{criterion}"] = consensus(rubric, values)
    return found


def item_scores_write(*, queue: ReviewQueue, review_item: ReviewItem) -> None:
    """Write the item's consensus to its result(s); count it in the passes."""
    found = item_consensus(queue, review_item)
    targets = [(queue.run_id, review_item.result_id, False)]
    if review_item.other_result_id is not None and queue.other_run_id is not None:
        targets.append((queue.other_run_id, review_item.other_result_id, True))
    for run_id, result_id, mirror in targets:
        counted = 0
        for name, each in found.items():
            shown = mirrored(each) if mirror and each is not None else each
            moved = _write(result_id, name, shown)
            counted += moved if name == queue.scorer_name else 0
        if counted:
            ScoringPass.objects.filter(
                run_id=run_id,
                initial=False,
                scorers=[_spec(queue, name) for name in found],
            ).update(scored=F("scored") + counted)
        results_changed(run_id)

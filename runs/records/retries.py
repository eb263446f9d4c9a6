"""What a retry may run again, and what it did: the rules and the tallies.

A retry is for errors: a call that failed, timed out or was cancelled, or an
answer whose every score is an error (a scorer raised or timed out). An
answer that was scored (passed or failed) is never drawn again in place:
retrying the wrong answers of a stochastic model until they pass would
inflate the run. The retry service refuses to choose such a result and the
writer (``rows.results_replace``) never replaces one, whatever marked it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Exists, F, OuterRef, Q

from runs.models import Result, RetryPass, Run, Score

# A score that is a verdict: passed or failed (or a value), not an error and
# not skipped by its condition.
VERDICT = Q(error="", skipped=False)
SCORE_ERROR = ~Q(error="")
ACTIVE = (RetryPass.Status.PENDING, RetryPass.Status.RUNNING)


def retryable() -> Q:
    """The results a retry may run again (over ``Result``)."""
    verdict = Exists(Score.objects.filter(VERDICT, result=OuterRef("pk")))
    errored = Exists(Score.objects.filter(SCORE_ERROR, result=OuterRef("pk")))
    return ~Q(status=Result.Status.SUCCEEDED) | (errored & ~verdict)


def answers_retryable(result_ids: Iterable[int]) -> set[int]:
    """Of these answered results, those a retry may replace: every score an error."""
    verdicts: set[int] = set()
    errors: set[int] = set()
    for result_id, error, skipped in Score.objects.filter(
        result_id__in=list(result_ids)
    ).values_list("result_id", "error", "skipped"):
        if error:
            errors.add(result_id)
        elif not skipped:
            verdicts.add(result_id)
    return errors - verdicts


def retry_tally(run_id: int, *, replaced: int, redrawn: int, kept: int) -> None:
    """Count what a retry did to stored results, on the run and on its pass
    under way; in the transaction that wrote them."""
    if not (replaced or kept):
        return
    Run.objects.filter(pk=run_id).update(
        retry_replaced=F("retry_replaced") + replaced,
        retry_replaced_answers=F("retry_replaced_answers") + redrawn,
    )
    RetryPass.objects.filter(run_id=run_id, status__in=ACTIVE).update(
        replaced=F("replaced") + replaced,
        redrawn=F("redrawn") + redrawn,
        kept=F("kept") + kept,
    )


def retry_pass_start(run_id: int, now: datetime) -> datetime | None:
    """An executor claimed the run: its retry pass under way (if any) starts,
    once. Returns when that pass started: what the run's deadline counts
    from, the run itself keeping its first start."""
    active = RetryPass.objects.filter(run_id=run_id, status__in=ACTIVE)
    active.filter(started_at__isnull=True).update(started_at=now)
    active.update(status=RetryPass.Status.RUNNING)
    return active.values_list("started_at", flat=True).first()


def retry_pass_end(run_id: int, status: str, now: datetime) -> datetime | None:
    """The run ended with ``status``: so does its retry pass under way (if
    any). Returns the end of the run's execution before that pass, which the
    run keeps (None without a pass)."""
    active = RetryPass.objects.filter(run_id=run_id, status__in=ACTIVE)
    found = active.values_list("pk", "run_finished_at").first()
    if found is None:
        return None
    active.update(status=status, finished_at=now)
    return found[1] or now

"""Retrying a run's results of some statuses, in the same run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet

from runs.access import Action, require
from runs.analysis.cluster_members import cluster_filter
from runs.errors import Conflict, InvalidInput
from runs.executor.options import RunOptions
from runs.executor.store import run_recount
from runs.models import (
    Item,
    Result,
    RetryPass,
    Run,
    RunStatus,
    ScoringPass,
)
from runs.records import rows
from runs.records.retries import ACTIVE, retryable
from runs.records.versions import results_changed
from runs.results.selectors import SKIPPED, run_items_lacking
from runs.results.services import run_launch

RETRY_STATUSES = (*Result.Status.values, SKIPPED)
DEFAULT_RETRY_STATUSES = (Result.Status.FAILED, Result.Status.TIMED_OUT)


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What a retry executes (or would, for a dry run).

    ``results`` counts executions of an (item, epoch): the stored results to
    rewrite (``rewrites``) plus those that have none (``missing``, the skipped
    ones); ``items`` the distinct items among them; ``calls`` the most calls
    to the target this can make, each execution making up to ``max_attempts``.
    """

    run: Run
    statuses: tuple[str, ...]
    cluster: str | None
    items: int
    rewrites: int
    missing: int
    max_attempts: int
    started: bool = False  # the results are marked and the run is pending
    launched: bool = False  # and handed to the launcher

    @property
    def results(self) -> int:
        return self.rewrites + self.missing

    @property
    def calls(self) -> int:
        return self.results * self.max_attempts


def _retry_statuses(
    statuses: Iterable[str] | None, cluster: str | None
) -> tuple[str, ...]:
    if statuses is None:
        # A cluster names its results itself (failed scores are succeeded calls).
        return tuple(Result.Status.values) if cluster else DEFAULT_RETRY_STATUSES
    chosen = tuple(dict.fromkeys(s.strip() for s in statuses if s and s.strip()))
    if not chosen:
        raise InvalidInput("choose at least one status to retry", field="statuses")
    for status in chosen:
        if status not in RETRY_STATUSES:
            known = ", ".join(RETRY_STATUSES)
            raise InvalidInput(
                f"must be among {known}, not {status!r}", field="statuses"
            )
    return chosen


def _retry_plan(
    run: Run, statuses: tuple[str, ...], cluster: str | None
) -> tuple[RetryPlan, QuerySet[Result]]:
    """The plan for an ended run, and the stored results it rewrites."""
    chosen = Result.objects.filter(
        run=run, retry_pending=False, status__in=[s for s in statuses if s != SKIPPED]
    )
    if cluster:
        chosen = chosen.filter(cluster_filter(cluster, run=run))
    stored = Result.objects.filter(run=run).count()
    missing = max(run.total - stored, 0)
    if missing and SKIPPED not in statuses:
        # The executor runs every item without a result: a run's leftovers are
        # part of whatever runs next in it.
        statuses = (*statuses, SKIPPED)
    lacking = run_items_lacking(run=run).values("pk") if missing else None
    items_q = Q(pk__in=chosen.values("item_id"))
    if lacking is not None:
        items_q |= Q(pk__in=lacking)
    items = Item.objects.filter(dataset_id=run.dataset_id).filter(items_q).count()
    plan = RetryPlan(
        run=run,
        statuses=statuses,
        cluster=cluster,
        items=items,
        rewrites=chosen.count(),
        missing=missing,
        max_attempts=RunOptions.from_dict(run.options).max_attempts,
    )
    return plan, chosen


def _refuse_answers(chosen: QuerySet[Result], cluster: str | None) -> None:
    """A choice that takes in answered and scored results is refused: a retry
    runs errors only, and never draws an answer again in place."""
    answers = chosen.exclude(retryable()).count()
    if not answers:
        return
    raise InvalidInput(
        f"{answers} of the chosen results {'was' if answers == 1 else 'were'} "
        "answered and scored (passed or failed): a retry runs errors only "
        "(failed, timed-out or cancelled calls, errored scores) and never "
        "draws an answer again in place. To sample again, start a run with "
        "more epochs; to score the answers again, re-score the run",
        field="cluster" if cluster else "statuses",
    )


def _retry_pass_create(run: Run, plan: RetryPlan, user: User | None) -> None:
    """Record the pass; one left under way by an earlier retry (its run
    ended without it) is closed as cancelled."""
    RetryPass.objects.filter(run=run, status__in=ACTIVE).update(
        status=RunStatus.CANCELLED
    )
    RetryPass.objects.create(
        run=run,
        statuses=list(plan.statuses),
        cluster=plan.cluster or "",
        results=plan.rewrites,
        missing=plan.missing,
        created_by=user,
        run_finished_at=run.finished_at,
    )


def run_retry(
    *,
    run: Run,
    user: User | None,
    statuses: Iterable[str] | None,
    cluster: str | None = None,
    dry_run: bool = False,
    launch: bool = True,
) -> RetryPlan:
    """Run the chosen results of an ended run again, inside the same run.

    In one transaction the chosen results are marked ``retry_pending`` and
    taken out of the counts, and the run goes back to pending; the executor
    then rewrites each of those rows in place (its attempts appended to the
    log) and runs the items that have no result. Rows a retry did not reach
    keep their previous outcome when the run ends, and so does a row whose
    retry did no better (records/rows.py). Refused while the run is
    executing, and for a choice that takes in answered and scored results
    (records/retries.py). ``statuses`` None: failed and timed out, or with a
    cluster every result of it. The run keeps the timing of its first
    execution; the pass (``RetryPass``) records its own. ``launch=False``
    leaves the execution to the caller.
    """
    if user is not None:
        require(user, run.project, Action.EDIT)
    cluster = (cluster or "").strip() or None
    statuses = _retry_statuses(statuses, cluster)
    with transaction.atomic():
        locked = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
        if not locked.is_final:
            raise Conflict(
                f"run {run.pk} is still {locked.status}: retry once it has "
                "ended (or cancel it first)"
            )
        if any(
            not scoring.stale
            for scoring in ScoringPass.objects.filter(
                run=locked, status__in=[ScoringPass.Status.PENDING, "running"]
            )
        ):
            raise Conflict(
                f"run {run.pk} is being re-scored: retry once the pass has ended"
            )
        plan, chosen = _retry_plan(locked, statuses, cluster)
        _refuse_answers(chosen, cluster)
        if dry_run or not plan.results:
            return plan
        rows.retry_mark(chosen)
        run_recount(locked)
        _retry_pass_create(locked, plan, user)
        locked.status = RunStatus.PENDING
        locked.cancel_requested = False
        locked.error = ""
        # The run keeps the start of its first execution, and its end (kept
        # by the pass meanwhile); the pass records its own.
        locked.finished_at = locked.heartbeat_at = None
        locked.executor_id = ""
        locked.throttle_limit = None
        locked.in_flight = 0
        locked.retries_used = 0  # a retry pass has the whole retry budget again
        results_changed(locked)
        locked.save()
    if launch:
        run_launch(run=locked)
    return replace(plan, run=locked, started=True, launched=launch)

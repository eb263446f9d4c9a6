"""Re-scoring an ended run: its stored outputs scored again, the target not called.

A re-score adds scorers to a run or replaces some of them by name (another
kind under the same name included); the scores of the other scorers stay.
The run's frozen scorer list takes the new and changed entries, so what it
says it was scored with is what its scores are. Every scoring pass is kept
(``ScoringPass``): who, when, which scorers with which parameters, and how
it went. The run's own execution is its first pass, recorded from the run
when it is first re-scored (until then ``selectors.scoring_passes`` shows it
as one).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from runs.access import Action, require
from runs.errors import ConfigError, Conflict, InvalidInput
from runs.executor.launchers import get_launcher
from runs.executor.rescore_store import results_to_score
from runs.models import Run, Score, ScoringPass
from runs.records.names import max_length
from runs.records.versions import results_changed
from runs.rescore.selectors import initial_pass
from runs.results.services import require_expected_answers
from runs.scorers import clean_scorer_specs
from runs.secrets.store import check_scorer_secrets

NAME_MAX = max_length(Score, "scorer")
INTERRUPTED = (
    "interrupted: its executor stopped reporting before the pass ended; "
    "re-score with the same scorers to run it again"
)


@dataclass(frozen=True, slots=True)
class RescorePlan:
    """What a re-score scores (or would, for a dry run).

    ``added`` and ``replaced`` are scorer names; ``kind_changes`` the
    replaced ones whose kind changes (old kind, new kind).
    """

    run: Run
    scorers: list[dict[str, Any]]
    results: int
    added: list[str]
    replaced: list[str]
    kind_changes: dict[str, tuple[str, str]] = field(default_factory=dict)
    scoring_pass: ScoringPass | None = None
    launched: bool = False


def merged_scorers(
    current: list[dict[str, Any]], new: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The run's scorer list with ``new`` entries replacing theirs by name
    (in place) or appended, in their order."""
    by_name = {spec["name"]: spec for spec in new}
    merged = [by_name.pop(spec["name"], spec) for spec in current]
    return [*merged, *by_name.values()]


def _in_run_order(run: Run, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pass's specs in the order the run will list them, checked as a whole.

    A condition may name one of the run's scorers that the pass leaves as it
    is (its stored score decides) or one the pass adds or replaces; the run's
    scorer list after the pass must still name each condition's scorer
    before the scorer it conditions, as on run creation.
    """
    merged = merged_scorers(run.scorers, specs)
    try:
        clean_scorer_specs(merged, path="scorers")
    except ConfigError as exc:
        raise ConfigError(
            f"the run's scorers after this re-score would not hold together: "
            f"{exc.message}",
            field="scorers",
        ) from None
    order = {spec["name"]: position for position, spec in enumerate(merged)}
    return sorted(specs, key=lambda spec: order[spec["name"]])


def run_results_to_score(*, run: Run) -> int:
    """How many of the run's results a scoring pass would score."""
    return results_to_score(run.pk).count()


def _plan(run: Run, specs: list[dict[str, Any]]) -> RescorePlan:
    current = {spec["name"]: spec for spec in run.scorers}
    names = [spec["name"] for spec in specs]
    return RescorePlan(
        run=run,
        scorers=specs,
        results=run_results_to_score(run=run),
        added=[name for name in names if name not in current],
        replaced=[name for name in names if name in current],
        kind_changes={
            spec["name"]: (current[spec["name"]]["kind"], spec["kind"])
            for spec in specs
            if spec["name"] in current and current[spec["name"]]["kind"] != spec["kind"]
        },
    )


def _check_not_busy(run: Run) -> None:
    """Refuse a run that executes or is being re-scored; close stale passes."""
    if not run.is_final:
        raise Conflict(
            f"run {run.pk} is still {run.status}: re-score it once it has ended "
            "(or cancel it first)"
        )
    for scoring in ScoringPass.objects.select_for_update().filter(
        run=run, status__in=[ScoringPass.Status.PENDING, ScoringPass.Status.RUNNING]
    ):
        if not scoring.stale:
            raise Conflict(
                f"run {run.pk} is being re-scored (pass {scoring.pk}, "
                f"{scoring.scored} of {scoring.total} results so far): wait "
                "until it ends"
            )
        scoring.status = ScoringPass.Status.INTERRUPTED
        scoring.error = INTERRUPTED
        scoring.finished_at = timezone.now()
        scoring.save(update_fields=["status", "error", "finished_at"])


def run_rescore(
    *,
    run: Run,
    user: User | AnonymousUser | None,
    scorers: list[Any],
    dry_run: bool = False,
    launch: bool = True,
) -> RescorePlan:
    """Score an ended run's succeeded results again with ``scorers``.

    Validated as on run creation (errors name ``scorers[i]...``); refused
    (409) while the run executes or another pass of it is under way. In one
    transaction the run's scorer list is updated and the pass recorded
    (with the run's first pass, the first time); the pass then executes in
    the background, or by the caller with ``launch=False``.
    """
    if user is not None:
        require(user, run.project, Action.EDIT)
    specs = clean_scorer_specs(
        scorers, path="scorers", earlier=[spec["name"] for spec in run.scorers]
    )
    if not specs:
        raise InvalidInput("choose at least one scorer", field="scorers")
    specs = _in_run_order(run, specs)
    for position, spec in enumerate(specs):
        if not spec["name"].strip() or len(spec["name"]) > NAME_MAX:
            raise InvalidInput(
                f"must be 1 to {NAME_MAX} characters, not only spaces",
                field=f"scorers[{position}].name",
            )
    require_expected_answers(run.dataset, specs)
    check_scorer_secrets(project=run.project, specs=specs)
    with transaction.atomic():
        locked = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
        _check_not_busy(locked)
        plan = _plan(locked, specs)
        if dry_run:
            return plan
        if not ScoringPass.objects.filter(run=locked).exists():
            initial_pass(locked).save()
        locked.scorers = merged_scorers(locked.scorers, specs)
        results_changed(locked)
        locked.save(update_fields=["scorers", "revision"])
        scoring = ScoringPass.objects.create(
            run=locked,
            scorers=specs,
            total=plan.results,
            user=user if user is not None and user.is_authenticated else None,
        )
    if launch:
        transaction.on_commit(lambda: get_launcher().launch_scoring_pass(scoring.pk))
    return replace(plan, run=locked, scoring_pass=scoring, launched=launch)

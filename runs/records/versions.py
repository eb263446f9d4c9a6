"""What moves a run's ``results_version``: the one way to say its results changed.

Everything cached from a run's results (its summary, charts, scorer figures,
clusters, comparisons, stored figures and verdicts, its page) is kept under
``Run.results_version`` (cache_keys.py) and never invalidated: a write that
changes the results without moving that version leaves those answers wrong
until they expire (a day, for a finished run). Storing a result moves the
run's counts, which are part of the version; every other writer of results
or scores (a retry taking results back, a re-score, a deletion in the admin)
calls ``results_changed``, in the transaction of its write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Case, F, When

from runs.models import Run


def results_changed(run: Run | int, *, scores_kept: bool = False) -> None:
    """Move the run's ``results_version``: nothing cached from its results is
    read again. A ``Run`` given is updated to the new version too (a caller
    that saves it afterwards keeps the move).

    ``scores_kept``: what changed is neither a result's outcome nor a score
    (a trace's steps), so a going run's score tallies still add up to its
    figures (runs/records/tallies.py), and keep counting at the new revision.
    """
    run_id = run.pk if isinstance(run, Run) else run
    moved: dict[str, Any] = {"revision": F("revision") + 1}
    if scores_kept:
        moved["tally_revision"] = Case(
            When(tally_revision=F("revision"), then=F("revision") + 1),
            default=F("tally_revision"),
        )
    Run.objects.filter(pk=run_id).update(**moved)
    if isinstance(run, Run):
        run.refresh_from_db(fields=list(moved))


def runs_results_changed(run_ids: Iterable[int]) -> None:
    """``results_changed`` for each of these runs."""
    ids = sorted(set(run_ids))
    if ids:
        Run.objects.filter(pk__in=ids).update(revision=F("revision") + 1)

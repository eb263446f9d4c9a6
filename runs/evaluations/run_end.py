"""The run-end hook of saved evaluations (``EVALSITE_RUN_END_HOOKS``).

Apart from the evaluations' services: every run's end calls the hook, in
every process that executes runs (each evalrun too), and most runs belong to
no evaluation. The services (with the alerts behind them) are imported when
a run of an evaluation ends.
"""

from __future__ import annotations

import logging

from runs.models import Run

logger = logging.getLogger(__name__)


def run_end_claim(run: Run) -> bool:
    """Whether this caller is the one to act on this end of the run: a run's
    end may be reported by several paths (its last shard, a settle, a
    cancel), and a retry ends it again (a new revision)."""
    key = f"{run.revision}:{run.status}"
    claimed = Run.objects.filter(pk=run.pk).exclude(evaluation_end=key)
    return bool(claimed.update(evaluation_end=key))


def run_ended(run: Run) -> None:
    """Called once a run has ended: a run of a saved evaluation is acted on
    once per end. Must stay quick; what is slow (deliveries) goes to the
    background."""
    if run.evaluation_id is None or not run.is_final:
        return
    if not run_end_claim(run):
        return
    logger.info(
        "run %s of evaluation %s ended: %s", run.pk, run.evaluation_id, run.status
    )
    from runs.evaluations.services import run_announce

    try:
        run_announce(run)
    except Exception:  # a channel, or its lookup, never fails the run
        logger.exception("run %s: its regression alert could not be handed on", run.pk)

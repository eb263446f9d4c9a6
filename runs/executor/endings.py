"""What a run's end tells beyond the executor: the hooks of a setting.

The executor knows nothing of evaluations or alerts: once a run's final
status is stored and announced, each hook named in ``EVALSITE_RUN_END_HOOKS``
is called with the run. A hook's error is logged, never the run's, and a hook
must hand anything slow (a delivery over the network) to the background.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.module_loading import import_string

from runs.models import Run

logger = logging.getLogger(__name__)


def run_end_hooks() -> list[Callable[[Run], None]]:
    return [import_string(path) for path in settings.EVALSITE_RUN_END_HOOKS]


def run_ended_tell(run_id: int) -> None:
    """Call every run-end hook with the run, if it has ended; errors logged."""
    try:
        run = Run.objects.filter(pk=run_id).first()
        if run is None or not run.is_final:
            return
        hooks = run_end_hooks()
    except Exception:  # the run has ended whatever a hook's lookup does
        logger.exception("run %s: could not read its end for the hooks", run_id)
        return
    for hook in hooks:
        try:
            hook(run)
        except Exception:  # a hook is not the run: it never fails it
            logger.exception("run %s: the run-end hook %s failed", run_id, hook)


arun_ended_tell = database_sync_to_async(run_ended_tell)

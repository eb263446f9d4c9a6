"""Reads of a run's retry passes: the list, and the run page's section of them."""

from __future__ import annotations

from typing import Any

from runs.models import RetryPass, Run
from runs.records import reads


def retry_passes(*, run: Run) -> list[RetryPass]:
    """The run's retry passes, oldest first, each with its author."""
    return reads.retry_passes(run_id=run.pk)


def retry_section(*, run: Run) -> dict[str, Any]:
    """What the run page's section of retry passes shows.

    A finished run's page is cached under the run's own row: a pass is
    created, and ends, in the transaction that moves the run's status (and
    its ``revision``), so a cached page never shows a pass out of date.
    """
    return {"run": run, "retry_passes": retry_passes(run=run)}

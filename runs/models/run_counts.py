"""A run's counts and what they tell, for the model and for rows read without it."""

from __future__ import annotations

from typing import Any

# The counts of a run's items, in the order pages show them: its total, then
# one per final status of a result.
RUN_COUNTS = ("total", "succeeded", "failed", "timed_out", "cancelled")


class RunCounts:
    """A run's name and counts, as ``Run`` and the rows of the runs table
    (runs/records/reads.py) both show them."""

    __slots__ = ()

    pk: Any
    name: str
    succeeded: int
    failed: int
    timed_out: int
    cancelled: int

    def __str__(self) -> str:
        return self.name or f"Run {self.pk}"

    @property
    def processed(self) -> int:
        return self.succeeded + self.failed + self.timed_out + self.cancelled

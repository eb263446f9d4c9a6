"""Why an execution stops early, and the error of a database that stays away."""

from __future__ import annotations

from enum import StrEnum

from runs.executor.clock import now
from runs.executor.store import ResultRecord
from runs.models import DEADLINE_ERROR_TYPE, ErrorKind, Result


class Stop(StrEnum):
    CANCEL = "cancel"
    DEADLINE = "deadline"
    FAIL_FAST = "fail_fast"
    STORAGE = "storage"
    # Another shard of the run stopped it with an error (a deadline, fail
    # fast, storage, an executor error): that error stays the run's.
    OTHER_SHARD = "other_shard"
    BUDGET = "budget"  # a drain, not a stop: see Execution.request_drain


class StorageUnavailable(Exception):
    """The database stayed unavailable past the run's storage timeout."""


def mark_interrupted(record: ResultRecord, reason: Stop, error: str) -> None:
    """What a stop makes of an item in flight: timed out at a deadline,
    cancelled for any other reason, its last attempt closed the same way."""
    if record.attempts and "outcome" not in record.attempts[-1]:
        outcome = "timeout" if reason == Stop.DEADLINE else "cancelled"
        record.attempts[-1].update(outcome=outcome, finished_at=now().isoformat())
    if reason == Stop.DEADLINE:
        record.status, record.error_kind = Result.Status.TIMED_OUT, ErrorKind.TIMEOUT
        record.error_type = DEADLINE_ERROR_TYPE
    else:
        record.status = Result.Status.CANCELLED
        record.error_kind = ErrorKind.CANCELLED
        record.error_type = "Cancelled"
    record.error_message = f"in flight when the run stopped: {error or reason}"
    record.output = None  # cut short: whatever it had is no answer

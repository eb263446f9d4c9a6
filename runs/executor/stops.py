"""Why an execution stops early, in words the run keeps as its error, and the
error of a database that stays away."""

from __future__ import annotations

from enum import StrEnum

from runs.calls.pricing import usd
from runs.executor.clock import now
from runs.executor.options import RunOptions
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


def fail_fast_error(finished: int, errors: int, options: RunOptions) -> str:
    """The run's error once ``errors`` of ``finished`` items failed, when that
    reaches the fail-fast rate ("": not yet, or no fail fast)."""
    rate = options.fail_fast_error_rate
    if rate is None or finished < options.fail_fast_min_items:
        return ""
    if errors / finished < rate:
        return ""
    return (
        f"stopped early: {errors} of {finished} items failed ({errors / finished:.0%}, "
        f"fail-fast threshold {rate:.0%}); the target looks unavailable"
    )


def budget_unkeepable(record: ResultRecord, budget: float) -> str:
    """Why the run's cost budget can no longer be kept after this item: tokens
    without a price, or an answer with neither tokens nor a cost ("": it can)."""
    answered = record.status == Result.Status.SUCCEEDED
    if record.cost is not None or not (record.unpriced or answered):
        return ""
    why = (
        f"no price for model {record.unpriced_model!r}"
        if record.unpriced
        else "the target reports neither tokens nor a cost"
    )
    return (
        f"cost budget of {usd(budget)} cannot be kept: {why} (set one in "
        "the price table and resume)"
    )


def budget_reached(budget: float, spent: float) -> str:
    return (
        f"cost budget of {usd(budget)} reached: {usd(spent)} spent "
        "(the items in flight were finished, so it may pass the budget by "
        "their cost); the items not started are skipped, resume with a "
        "higher budget to run them"
    )

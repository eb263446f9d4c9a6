"""Why an execution stops early, and the error of a database that stays away."""

from __future__ import annotations

from enum import StrEnum


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

"""The app's models, one module per area; every one is importable from here."""

from __future__ import annotations

from runs.models.datasets import Dataset, Item, ReadyDatasetManager
from runs.models.prices import ModelPrice, RateBucket
from runs.models.projects import ApiKey, Membership, Project, ProjectSecret, Target
from runs.models.results import (
    ErrorKind,
    Result,
    ResultStatus,
    RunFigures,
    RunVerdicts,
    Score,
    ScoringPass,
)
from runs.models.retries import RetryPass
from runs.models.runs import (
    FINAL_RUN_STATUSES,
    HEARTBEAT_STALE_SECONDS,
    Run,
    RunShard,
    RunStatus,
)

__all__ = [
    "FINAL_RUN_STATUSES",
    "HEARTBEAT_STALE_SECONDS",
    "ApiKey",
    "Dataset",
    "ErrorKind",
    "Item",
    "Membership",
    "ModelPrice",
    "Project",
    "ProjectSecret",
    "RateBucket",
    "ReadyDatasetManager",
    "Result",
    "ResultStatus",
    "RetryPass",
    "Run",
    "RunFigures",
    "RunShard",
    "RunStatus",
    "RunVerdicts",
    "Score",
    "ScoringPass",
    "Target",
]

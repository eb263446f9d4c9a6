"""The app's models, one module per area; every one is importable from here."""

from __future__ import annotations

from runs.models.alerts import AlertChannel, AlertDelivery
from runs.models.datasets import Dataset, Item, ReadyDatasetManager
from runs.models.evaluations import (
    Evaluation,
    EvaluationChange,
    Schedule,
    ScheduleTick,
)
from runs.models.prices import ModelPrice, RateBucket
from runs.models.projects import ApiKey, Membership, Project, ProjectSecret, Target
from runs.models.results import (
    ATTEMPTS_MADE,
    CALL_STATUS_LABELS,
    DEADLINE_ERROR_TYPE,
    RESULT_OUTCOME,
    STOPPED_IN_FLIGHT,
    ErrorKind,
    Result,
    ResultStatus,
    RunContentClusters,
    RunFigures,
    RunResultTable,
    RunVerdicts,
    Score,
    ScoreTally,
    ScoringPass,
    call_status_label,
)
from runs.models.retries import RetryPass
from runs.models.review import (
    HUMAN_SCORER_PREFIX,
    ReviewAdjudication,
    ReviewItem,
    ReviewLabel,
    ReviewLabelChange,
    ReviewQueue,
    ReviewSource,
    RubricKind,
)
from runs.models.run_counts import RUN_COUNTS, RunCounts
from runs.models.runs import (
    FINAL_RUN_STATUSES,
    HEARTBEAT_STALE_SECONDS,
    Run,
    RunShard,
    RunStatus,
)
from runs.models.steps import Step, StepKind

__all__ = [
    "ATTEMPTS_MADE",
    "CALL_STATUS_LABELS",
    "DEADLINE_ERROR_TYPE",
    "FINAL_RUN_STATUSES",
    "HEARTBEAT_STALE_SECONDS",
    "HUMAN_SCORER_PREFIX",
    "RESULT_OUTCOME",
    "RUN_COUNTS",
    "STOPPED_IN_FLIGHT",
    "AlertChannel",
    "AlertDelivery",
    "ApiKey",
    "Dataset",
    "ErrorKind",
    "Evaluation",
    "EvaluationChange",
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
    "ReviewAdjudication",
    "ReviewItem",
    "ReviewLabel",
    "ReviewLabelChange",
    "ReviewQueue",
    "ReviewSource",
    "RubricKind",
    "Run",
    "RunContentClusters",
    "RunCounts",
    "RunFigures",
    "RunResultTable",
    "RunShard",
    "RunStatus",
    "RunVerdicts",
    "Schedule",
    "ScheduleTick",
    "Score",
    "ScoreTally",
    "ScoringPass",
    "Step",
    "StepKind",
    "Target",
    "call_status_label",
]

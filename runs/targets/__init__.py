"""Targets: one file per kind, registered by kind string."""

from __future__ import annotations

from runs.targets import (  # noqa: F401  (registration)
    chain,
    demo,
    http,
    openai_chat,
    python,
    replay,
    scorer,
)
from runs.targets.base import (
    REGISTRY,
    Target,
    TargetError,
    TargetInput,
    TargetOutput,
    build_target,
    clean_target_config,
)

__all__ = [
    "REGISTRY",
    "Target",
    "TargetError",
    "TargetInput",
    "TargetOutput",
    "build_target",
    "clean_target_config",
]

"""Targets: one file per kind, registered by kind string."""

from __future__ import annotations

from runs.targets import demo, openai_chat, python, scorer  # noqa: F401  (registration)
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

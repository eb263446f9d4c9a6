"""Targets: one file per kind, registered by kind string; and the target pages.

Importing the package registers the built-in kinds (``RunsConfig.ready``).
The registry, the protocol and ``build_target`` live in the plug-in core
(``runs.plugins.targets``).
"""

from __future__ import annotations

from runs.plugins.targets import (
    REGISTRY,
    Target,
    TargetError,
    TargetInput,
    TargetOutput,
    build_target,
    clean_target_config,
)
from runs.targets import (  # noqa: F401  (registration)
    chain,
    demo,
    http,
    openai_chat,
    python,
    replay,
    scorer,
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

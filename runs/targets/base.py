"""What a target plug-in is written against (a public module for plug-in authors).

The names live in the plug-in core (``runs.plugins.targets``); this module
hands them on under the path plug-ins have always imported.
"""

from __future__ import annotations

from runs.plugins.declaration import Plugin, SecretRef, TargetContext
from runs.plugins.targets import (
    REGISTRY,
    TARGETS,
    Target,
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    build_target,
    clean_target_config,
    get_target_class,
    register,
)

__all__ = [
    "REGISTRY",
    "TARGETS",
    "Plugin",
    "SecretRef",
    "Target",
    "TargetContext",
    "TargetError",
    "TargetInput",
    "TargetOutput",
    "TargetPlugin",
    "build_target",
    "clean_target_config",
    "get_target_class",
    "register",
]

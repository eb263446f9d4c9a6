"""What a scorer plug-in is written against (a public module for plug-in authors).

The names live in the plug-in core (``runs.plugins.scorers``); this module
hands them on under the path plug-ins have always imported.
"""

from __future__ import annotations

from runs.plugins.declaration import SecretRef, TargetContext
from runs.plugins.scorers import (
    INLINE_CHARS,
    REGISTRY,
    SCORERS,
    Condition,
    ScoreOutcome,
    Scorer,
    ScorerError,
    ScorerPlugin,
    as_text,
    build_scorer,
    clean_scorer_specs,
    register,
)
from runs.plugins.targets import TargetInput

__all__ = [
    "INLINE_CHARS",
    "REGISTRY",
    "SCORERS",
    "Condition",
    "ScoreOutcome",
    "Scorer",
    "ScorerError",
    "ScorerPlugin",
    "SecretRef",
    "TargetContext",
    "TargetInput",
    "as_text",
    "build_scorer",
    "clean_scorer_specs",
    "register",
]

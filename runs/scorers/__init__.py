"""Scorers: one file per kind, registered by kind string.

Importing the package registers the built-in kinds (``RunsConfig.ready``).
The registry, the protocol and ``build_scorer`` live in the plug-in core
(``runs.plugins.scorers``).
"""

from __future__ import annotations

from runs.plugins.scorers import (
    REGISTRY,
    ScoreOutcome,
    Scorer,
    build_scorer,
    clean_scorer_specs,
)
from runs.scorers import (  # noqa: F401  (registration)
    choice,
    code_exec,
    exact_match,
    f1,
    includes,
    json_schema,
    llm_judge,
    math_answer,
    numeric,
    python,
    regex,
    similarity,
)

__all__ = ["REGISTRY", "ScoreOutcome", "Scorer", "build_scorer", "clean_scorer_specs"]

"""Scorers: one file per kind, registered by kind string."""

from __future__ import annotations

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
from runs.scorers.base import (
    REGISTRY,
    ScoreOutcome,
    Scorer,
    build_scorer,
    clean_scorer_specs,
)

__all__ = ["REGISTRY", "ScoreOutcome", "Scorer", "build_scorer", "clean_scorer_specs"]

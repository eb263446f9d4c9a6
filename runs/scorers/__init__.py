"""Scorers: one file per kind, registered by kind string."""

from __future__ import annotations

from runs.scorers import code_exec, exact_match, includes, numeric, regex  # noqa: F401  (registration)
from runs.scorers.base import (
    REGISTRY,
    ScoreOutcome,
    Scorer,
    build_scorer,
    clean_scorer_specs,
)

__all__ = ["REGISTRY", "ScoreOutcome", "Scorer", "build_scorer", "clean_scorer_specs"]

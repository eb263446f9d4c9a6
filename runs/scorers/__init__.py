"""Scorers: one file per kind, registered by kind string.

Importing this package registers the built-in scorer kinds (``RunsConfig.ready``);
the names it hands on (the registry, ``Scorer``, ``build_scorer``...) are
those of the plug-in core, ``runs.plugins.scorers``.
"""

from __future__ import annotations

from runs.plugins import scorers
from runs.plugins.scorers import *  # noqa: F403
from runs.scorers import (  # noqa: F401  (registration)
    choice,
    code_exec,
    exact_match,
    f1,
    includes,
    json_schema,
    llm_judge,
    math_answer,
    max_steps,
    numeric,
    python,
    regex,
    similarity,
    stuck_loop,
    tool_called,
    tool_errors,
    tool_waste,
    trajectory_match,
)

__all__ = scorers.__all__

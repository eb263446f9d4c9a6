"""Scorers: one file per kind, registered by kind string.

Importing this package registers the built-in scorer kinds (``RunsConfig.ready``),
each module imported when its kind is first needed;
the names it hands on (the registry, ``Scorer``, ``build_scorer``...) are
those of the plug-in core, ``runs.plugins.scorers``.
"""

from __future__ import annotations

from runs.plugins import scorers
from runs.plugins.scorers import *  # noqa: F403

# Each built-in kind and the module that registers it, imported when the kind
# is first looked up or every kind is read (``Registry.defer``): a run of one
# scorer imports no other's module (a judge's client, the sandbox, RE2...).
BUILT_IN = {
    "choice": "choice",
    "code_exec": "code_exec",
    "exact_match": "exact_match",
    "f1": "f1",
    "includes": "includes",
    "json": "json_schema",
    "llm_judge": "llm_judge",
    "math": "math_answer",
    "max_steps": "max_steps",
    "numeric": "numeric",
    "python": "python",
    "regex": "regex",
    "similarity": "similarity",
    "stuck_loop": "stuck_loop",
    "tool_called": "tool_called",
    "tool_errors": "tool_errors",
    "tool_waste": "tool_waste",
    "trajectory_match": "trajectory_match",
}
for kind, module in BUILT_IN.items():
    scorers.SCORERS.defer(kind, f"{__name__}.{module}")

__all__ = scorers.__all__

"""Scoring one output as the executor does: through a worker, off the event loop."""

from __future__ import annotations

from typing import Any

from runs.executor.scoring import ScorerCall
from runs.scorers import ScoreOutcome, build_scorer, clean_scorer_specs
from runs.targets import TargetInput

HUGE = 5 * 1024 * 1024


def item(expected: Any = None, metadata: dict[str, Any] | None = None) -> TargetInput:
    return TargetInput(
        index=0, external_id="x", input="q", expected=expected, metadata=metadata or {}
    )


async def score(
    kind: str,
    output: Any,
    expected: Any = None,
    *,
    metadata: dict[str, Any] | None = None,
    **params: Any,
) -> ScoreOutcome:
    spec = clean_scorer_specs([{"kind": kind, "params": params}])[0]
    return await ScorerCall(build_scorer(spec), output, item(expected, metadata)).run()

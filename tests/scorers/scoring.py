"""Scoring one output as the executor does: through a worker, off the event loop."""

from __future__ import annotations

from typing import Any

from runs.plugins.scoring import ScorerCall
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


def branching_chain(depth: int, *, array: bool = False) -> dict[str, Any]:
    """``depth`` levels of anyOf whose two branches both $ref the next level:
    2^depth evaluations for a value that matches none (a number)."""
    defs: dict[str, Any] = {
        f"d{n}": {"anyOf": [{"$ref": f"#/$defs/d{n + 1}"}] * 2} for n in range(depth)
    }
    defs[f"d{depth}"] = {"type": "string"}
    if array:
        return {"$defs": defs, "type": "array", "items": {"$ref": "#/$defs/d0"}}
    return {"$defs": defs, "$ref": "#/$defs/d0"}

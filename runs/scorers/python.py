"""A Python callable from the allowlist in settings, as a scorer, sync or async."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from pydantic import Field

from runs.plugins import Params, allowlisted, load_callable
from runs.plugins.params import is_async
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, register
from runs.plugins.targets import TargetInput


class PythonScorerParams(Params):
    callable: Annotated[str, allowlisted("EVALSITE_PYTHON_SCORERS")] = Field(
        description=(
            "Dotted path of a function listed in EVALSITE_PYTHON_SCORERS; it "
            "gets (output, item) and returns a verdict (sync or async)."
        ),
    )
    threshold: float | None = Field(
        None,
        allow_inf_nan=False,
        description=(
            "When the function returns a number: passes at or above this. "
            "Without it, a number is a measurement with no verdict."
        ),
    )


def outcome_of(value: Any, threshold: float | None) -> ScoreOutcome:
    """What a scorer function returned, as a score; anything else is an error."""
    if isinstance(value, ScoreOutcome):
        return value
    if isinstance(value, bool):
        return ScoreOutcome(float(value), value, "the function returned " + str(value))
    if isinstance(value, int | float):
        number = _finite(value, "the function")
        return ScoreOutcome(number, _verdict(number, threshold), f"returned {number:g}")
    if isinstance(value, dict):
        unknown = set(value) - {"value", "passed", "reason"}
        if unknown:
            raise TypeError(
                f"the function returned unknown keys {sorted(unknown)} (value, "
                "passed, reason)"
            )
        passed = value.get("passed")
        if passed is not None and not isinstance(passed, bool):
            raise TypeError(f"'passed' must be true, false or null, not {passed!r}")
        raw = value.get("value", None if passed is None else float(passed))
        if raw is None or isinstance(raw, bool) or not isinstance(raw, int | float):
            raise TypeError(f"'value' must be a number, not {raw!r}")
        number = _finite(raw, "'value'")
        if passed is None:
            passed = _verdict(number, threshold)
        reason = value.get("reason") or f"returned {number:g}"
        return ScoreOutcome(number, passed, str(reason)[:10_000])
    raise TypeError(
        f"the function returned {type(value).__name__}; expected a bool, a number, "
        "a dict (value, passed, reason) or a ScoreOutcome"
    )


def _finite(value: float, what: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} returned {number}, not a finite number")
    return number


def _verdict(number: float, threshold: float | None) -> bool | None:
    return None if threshold is None else number >= threshold


@register
class PythonScorer(ScorerPlugin[PythonScorerParams]):
    """Calls an allowlisted function as ``fn(output, item)`` and records its verdict.

    ``item`` has ``input``, ``expected``, ``metadata``, ``index`` and
    ``external_id``. The function returns a bool (pass or fail, value 1 or 0),
    a number (the value; it passes at or above ``threshold``, and without one
    has no verdict), a dict with ``value``, ``passed`` and ``reason`` (each
    optional but one of value and passed), or a ScoreOutcome. Anything else,
    NaN, or an exception is a scorer error. A plain function runs in the
    scorer worker pool; an ``async def`` one runs on the event loop and must
    only wait (on I/O), never compute.
    """

    kind: ClassVar[str] = "python"
    label: ClassVar[str] = "Python function (allowlisted)"
    example: ClassVar[dict[str, Any]] = {"callable": "runs.scorers.examples.non_empty"}
    needs_expected: ClassVar[bool] = False
    fn: Callable[..., Any]

    def __new__(cls, name: str, params: PythonScorerParams) -> PythonScorer:
        # The executor runs ``score`` on the loop only if it is a coroutine
        # function: an async callable gets the class whose score is async.
        fn = load_callable(params.callable)
        chosen = AsyncPythonScorer if is_async(fn) else cls
        instance = super().__new__(chosen)
        instance.fn = fn
        return instance

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        return outcome_of(self.fn(output, item), self.params.threshold)


class AsyncPythonScorer(PythonScorer):
    # Async on purpose: the executor awaits a coroutine function's score on the
    # loop (runs_on_loop), and runs a plain one in a worker thread.
    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:  # type: ignore[override]  # see above
        return outcome_of(await self.fn(output, item), self.params.threshold)

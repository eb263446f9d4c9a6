from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.pools.math_worker import compare
from runs.pools.processes import MATH, WorkerEnded, WorkTimeout, run_in_process
from runs.scorers.text import expected_answers

# The final answer comes last: only the end of a long output is read.
OUTPUT_TAIL = 20_000
# An expected answer already in math mode or boxed is parsed as written;
# another is read as the content of a \boxed{} (so "50\%" is a percentage).
_DELIMITED = re.compile(r"\$|\\\(|\\\[|\\boxed")


def quoted(value: str) -> str:
    """``value`` in backticks, on one line: a value that varies from item to
    item, so that failures of one kind share their pattern (signatures)."""
    return "`" + " ".join(value.replace("`", "'").split()) + "`"


class MathParams(Params):
    float_rounding: int = Field(
        6,
        ge=0,
        le=15,
        title="Decimal places",
        description=(
            "Where a decimal is compared with a number, both are rounded to "
            "this many decimal places (math-verify's float_rounding)."
        ),
    )
    timeout_seconds: int = Field(
        5,
        ge=1,
        le=60,
        description=(
            "Longest parse or comparison step; the whole check is stopped after "
            "twice this and fails."
        ),
    )


@register
class Math(ScorerPlugin[MathParams]):
    """Passes when the output's final answer equals the expected one mathematically.

    Both are parsed with math-verify: LaTeX and plain expressions, the last
    ``\\boxed{}`` or "final answer" of the output first, fractions, roots,
    percentages, sets, intervals and equations, compared symbolically and
    numerically (decimals rounded to ``float_rounding`` places), so ``1/2``,
    ``0.5``, ``\\frac{1}{2}`` and ``\\boxed{\\frac12}`` agree. An expected
    answer without ``$`` or ``\\boxed`` is read as if boxed (MATH's answers,
    ``50\\%``). The reason shows both extracted values, in backticks. Only
    the last 20,000 characters of an output are read. Each check runs in a
    worker process: a step taking over ``timeout_seconds`` fails the output,
    and the worker is killed and replaced if it does not stop, or at the
    run's scorer timeout.
    """

    kind: ClassVar[str] = "math"
    label: ClassVar[str] = "Math answer (math-verify)"
    example: ClassVar[dict[str, Any]] = {"float_rounding": 6, "timeout_seconds": 5}

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        golds = [
            answer if _DELIMITED.search(answer) else f"\\boxed{{{answer}}}"
            for answer in (a.strip() for a in expected_answers(item))
            if answer
        ]
        if not golds:
            raise ValueError("the expected answer is empty")
        text = as_text(output)
        cut = len(text) > OUTPUT_TAIL
        timeout = self.params.timeout_seconds
        try:
            # In a worker process, awaited here: the run's scorer timeout
            # kills the process; math-verify's own alarms stop most slow steps
            # first, and the pool stops the rest at twice the timeout.
            result = await run_in_process(
                MATH,
                compare,
                golds,
                text[-OUTPUT_TAIL:],
                float_rounding=self.params.float_rounding,
                timeout=timeout,
                kill_after=2 * timeout,
            )
        except WorkTimeout:
            return ScoreOutcome(
                0.0, False, f"the check took over {2 * timeout} s and was stopped"
            )
        except WorkerEnded as exc:
            return ScoreOutcome(0.0, False, f"the comparison failed: {exc}")
        read = f"the last {OUTPUT_TAIL:,} characters of the output" if cut else ""
        if result.problem == "no-gold":
            shown = " or ".join(repr(g[:100]) for g in expected_answers(item))
            raise ValueError(f"math-verify cannot read the expected answer {shown}")
        if result.problem == "timeout":
            return ScoreOutcome(
                0.0, False, f"a step took over {timeout} s (timeout_seconds)"
            )
        if result.problem:
            name, _, message = result.problem.partition(": ")
            return ScoreOutcome(
                0.0, False, f"the comparison failed: {name}: {quoted(message)}"
            )
        if not result.answer:
            where = read or "the output"
            return ScoreOutcome(
                0.0,
                False,
                f"no answer found in {where}; expected {quoted(result.gold)}",
            )
        verdict = "equals" if result.equal else "does not equal"
        note = f" (read from {read})" if read else ""
        return ScoreOutcome(
            1.0 if result.equal else 0.0,
            result.equal,
            f"answer {quoted(result.answer)} {verdict} expected "
            f"{quoted(result.gold)}{note}",
        )

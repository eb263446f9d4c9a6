from __future__ import annotations

import math
import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.scorers.text import SLICE

# A decimal number: an optional sign, digits with optional thousands separators
# in groups of three (1,234,567), an optional fraction, an optional exponent.
# Commas elsewhere separate numbers: "1,2" is 1 and 2, never 12. A fixed pattern
# without nested repetition, so Python's engine runs it in linear time.
_NUMBER = re.compile(
    r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
)
# Characters a number can contain; a slice cut just after any other character
# splits no number, so its numbers are those a scan of the whole text finds.
_NOT_NUMBER = re.compile(r"[^\d,.eE+\-]")


class NumericParams(Params):
    abs_tol: float = Field(
        1e-6,
        ge=0,
        allow_inf_nan=False,
        title="Absolute tolerance",
        description="Largest difference that still counts as equal.",
    )
    rel_tol: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        title="Relative tolerance",
        description="Largest difference as a fraction of the larger number.",
    )
    extract: Literal["last", "first", "only"] = Field(
        "last",
        description=(
            "Which number of the output is compared: the last (a final answer "
            "after the working), the first, or the only one (several fail)."
        ),
    )


def _numbers_in(text: str, which: str) -> tuple[str | None, int]:
    """The chosen number of ``text`` and how many numbers were seen (``only``: up to 2).

    Never a list of every number of a huge output: the first is one search, the
    last is looked for in slices from the end, each a short C call.
    """
    if which == "first":
        found = _NUMBER.search(text)
        return (found.group(0), 1) if found else (None, 0)
    if which == "last":
        token = _last_number(text)
        return token, 0 if token is None else 1
    chosen: str | None = None
    seen = 0
    for found in _NUMBER.finditer(text):
        chosen, seen = found.group(0), seen + 1
        if seen > 1:
            break
    return chosen, seen


def _last_number(text: str, size: int = SLICE) -> str | None:
    end = len(text)
    while end > 0:
        start = max(0, end - size)
        if start > 0:
            # Nothing but number characters before the window's end: scan it all.
            cut = _NOT_NUMBER.search(text, start, end)
            start = cut.end() if cut and cut.end() < end else 0
        last = None
        for last in _NUMBER.finditer(text, start, end):  # noqa: B007
            pass
        if last is not None:
            return last.group(0)
        end = start
    return None


def _as_float(token: str) -> float:
    return float(token.replace(",", ""))


@register
class Numeric(ScorerPlugin[NumericParams]):
    """Passes when a number in the output is within tolerance of the expected number.

    The expected answer must hold exactly one number (``3/4`` or ``3 to 5`` is a
    scorer error, not a silent 3). From the output, ``extract`` takes the
    ``last`` number (default: a final answer after the working), the ``first``,
    or the ``only`` one (an output with several numbers fails). Numbers are
    decimal: sign, digits, thousands separators in groups of three, fraction,
    exponent (``-1,234.5e3``). Passes when ``|got - expected| <= max(rel_tol *
    max(|got|, |expected|), abs_tol)`` (defaults: ``abs_tol`` 1e-6, ``rel_tol`` 0).
    """

    kind: ClassVar[str] = "numeric"
    label: ClassVar[str] = "Numeric (tolerance)"
    example: ClassVar[dict[str, Any]] = {
        "abs_tol": 0.01,
        "rel_tol": 0.0,
        "extract": "last",
    }

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        expected = self.expected_number(item.expected)
        which = self.params.extract
        token, seen = _output_number(output, which)
        if token is None:
            return ScoreOutcome(0.0, False, "output has no number")
        if which == "only" and seen > 1:
            return ScoreOutcome(0.0, False, "output has more than one number")
        got = _as_float(token) if isinstance(token, str) else token
        ok = math.isclose(
            got,
            expected,
            rel_tol=self.params.rel_tol,
            abs_tol=self.params.abs_tol,
        )
        relation = "within" if ok else "outside"
        return ScoreOutcome(
            1.0 if ok else 0.0,
            ok,
            f"{which} number {got:g} vs {expected:g}: {relation} tolerance",
        )

    @staticmethod
    def expected_number(value: Any) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        token, seen = _numbers_in(as_text(value), "only")
        if token is None:
            raise ValueError(f"expected value {as_text(value)!r} has no number")
        if seen > 1:
            raise ValueError(
                f"expected value {as_text(value)[:200]!r} has more than one number"
            )
        return _as_float(token)


def _output_number(output: Any, which: str) -> tuple[str | float | None, int]:
    if isinstance(output, bool):
        return None, 0
    if isinstance(output, int | float):
        return float(output), 1
    return _numbers_in(as_text(output), which)

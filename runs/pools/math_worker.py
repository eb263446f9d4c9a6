"""Math answer equivalence (math-verify), as a worker process computes it.

The ``math`` scorer's work is parsing LaTeX and comparing with SymPy, which on
a hostile expression (``10^{10^{10^{10}}}``, a huge nested fraction) can run
for ever inside C code that no signal interrupts, holding the GIL meanwhile.
math-verify's own timeouts use ``signal.alarm``, which works only in a main
thread. So each comparison runs in a pool of worker processes
(``runs/pools/processes.py``): there, math-verify's alarms work (a task runs
in the process's main thread), and a comparison that outlives its timeout has
its process killed and replaced. A worker also has an address space limit,
so that a runaway power fails with MemoryError instead of taking the
machine's memory.

This module sits outside ``runs.scorers`` so that a worker imports it without
Django: only the standard library and math-verify.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

# Characters of an expression or comparison result shown in a reason.
SHOWN = 120


@dataclass(frozen=True)
class Comparison:
    """What was compared, as text, and whether it agreed."""

    equal: bool
    gold: str
    answer: str
    problem: str = ""


def warm_up() -> None:
    """A new worker's preparation (``runs/pools/processes.py``)."""
    # math-verify logs each timeout with the whole text it was parsing; the
    # score's reason already says what happened.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    import math_verify  # noqa: F401  (imported once, before the first task)


def _shown(parsed: list[Any]) -> str:
    """A parse as text: the value, and the text it was read from."""
    if not parsed:
        return ""
    value = str(parsed[0])
    source = str(parsed[-1]) if len(parsed) > 1 else value
    value = value if len(value) <= SHOWN else value[: SHOWN - 1] + "…"
    source = source if len(source) <= SHOWN else source[: SHOWN - 1] + "…"
    return value if value == source else f"{value} (from {source})"


def compare(
    golds: list[str], answer: str, *, float_rounding: int, timeout: int
) -> Comparison:
    """Parse the expected answers and the output, and verify them (in a worker)."""
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    try:
        parsed_golds = [parse(gold, parsing_timeout=timeout) for gold in golds]
        parsed_golds = [gold for gold in parsed_golds if gold]
        if not parsed_golds:
            return Comparison(False, "", "", problem="no-gold")
        parsed = parse(answer, parsing_timeout=timeout)
        if not parsed:
            return Comparison(False, _shown(parsed_golds[0]), "")
        for gold in parsed_golds:
            if verify(
                gold,
                parsed,
                float_rounding=float_rounding,
                timeout_seconds=timeout,
                raise_on_error=True,
            ):
                return Comparison(True, _shown(gold), _shown(parsed))
        return Comparison(False, _shown(parsed_golds[0]), _shown(parsed))
    except TimeoutException:
        return Comparison(False, "", "", problem="timeout")
    except MemoryError:
        return Comparison(False, "", "", problem="memory")
    except Exception as exc:  # SymPy's errors have no common base
        return Comparison(False, "", "", problem=f"{type(exc).__name__}: {exc}"[:300])

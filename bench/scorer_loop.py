"""How long scoring keeps the event loop from answering, and what the pool costs.

    python bench/scorer_loop.py

For each built-in scorer on a 10 MB output, and for the pattern ``(a+)+$``
that froze the server, the longest gap between ticks of a coroutine that asks
for a 1 ms sleep, while the output is scored two ways: called on the loop, as
scorers used to be, and through the scorer worker pool, as the executor does
now. Then the cost per call of the pool for small outputs, one at a time and
50 at once. Figures depend on the machine.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django

django.setup()

from runs.plugins.scoring import ScorerCall  # noqa: E402
from runs.scorers import ScoreOutcome, build_scorer, clean_scorer_specs  # noqa: E402
from runs.targets import TargetInput  # noqa: E402

HUGE = 10 * 1024 * 1024


def scorer(kind: str, **params: Any) -> Any:
    return build_scorer(clean_scorer_specs([{"kind": kind, "params": params}])[0])


def item(expected: Any) -> TargetInput:
    return TargetInput(index=0, external_id="x", input="q", expected=expected)


def huge_text(last_words: str) -> str:
    filler = "the 7 answers, maybe 13; or... "
    return filler * (HUGE // len(filler)) + last_words


class BacktrackingRegex:
    """The regex scorer as it was: Python's ``re``, on the loop."""

    name = "regex"

    def __init__(self, pattern: str) -> None:
        self.pattern = re.compile(pattern)

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        found = self.pattern.search(output)
        return ScoreOutcome(float(bool(found)), bool(found))


async def longest_gap(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """(longest gap between ticks, total seconds) while ``work`` runs, in ms."""
    gaps: list[float] = []
    done = False

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    began = time.perf_counter()
    await work()
    total = time.perf_counter() - began
    done = True
    await ticker
    return max(gaps) * 1000, total * 1000


async def on_loop(s: Any, output: Any, it: TargetInput) -> Any:
    result = s.score(output=output, item=it)
    return await result if asyncio.iscoroutine(result) else result


async def main() -> None:
    cases = [
        (
            "exact_match, 10 MB, collapse + punctuation",
            scorer("exact_match", collapse_whitespace=True, ignore_punctuation=True),
            huge_text("so 42"),
            "so 42",
        ),
        ("includes, 10 MB", scorer("includes"), huge_text("final: 421"), "42"),
        ("numeric, 10 MB", scorer("numeric"), huge_text("final: 1,234.5"), "1234.5"),
        (
            "regex (\\w+\\s?)+$, 10 MB",
            scorer("regex", pattern=r"(\w+\s?)+$"),
            huge_text("x!"),
            None,
        ),
    ]
    print(f"{'case':48} {'on loop: gap / total ms':>26} {'pool: gap / total ms':>24}")
    for label, s, output, expected in cases:
        it = item(expected)
        inline = await longest_gap(lambda s=s, o=output, i=it: on_loop(s, o, i))
        pooled = await longest_gap(
            lambda s=s, o=output, i=it: ScorerCall(s, o, i).run()
        )
        print(
            f"{label:48} {inline[0]:12.1f} / {inline[1]:8.1f}"
            f" {pooled[0]:12.1f} / {pooled[1]:8.1f}"
        )
    hostile = "a" * 24 + "!"
    old = await longest_gap(
        lambda: on_loop(BacktrackingRegex(r"(a+)+$"), hostile, item(None))
    )
    new = await longest_gap(
        lambda: ScorerCall(
            scorer("regex", pattern=r"(a+)+$"), hostile, item(None)
        ).run()
    )
    print(
        f"{'(a+)+$ on 24 a + ! (re on loop vs RE2 pool)':48} {old[0]:12.1f} / "
        f"{old[1]:8.1f} {new[0]:12.1f} / {new[1]:8.1f}"
    )

    small = scorer("exact_match")
    it = item("42")
    count = 20_000
    for label, run in (
        ("on the loop", lambda: on_loop(small, "42", it)),
        ("pool, one at a time", lambda: ScorerCall(small, "42", it).run()),
    ):
        began = time.perf_counter()
        for _ in range(count):
            await run()
        spent = (time.perf_counter() - began) / count * 1e6
        print(f"small output, {label:34} {spent:8.1f} us per call")
    began = time.perf_counter()
    for _ in range(count // 50):
        await asyncio.gather(*(ScorerCall(small, "42", it).run() for _ in range(50)))
    spent = (time.perf_counter() - began) / count * 1e6
    print(f"small output, {'pool, 50 at once':34} {spent:8.1f} us per call")


if __name__ == "__main__":
    asyncio.run(main())

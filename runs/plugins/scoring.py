"""Where a scorer's work runs: CPU work in a bounded thread pool, never on the loop.

The event loop of a process serves every page, websocket and run at once; a
scorer computing on it (a regular expression, a parse of a huge output) stops
all of them, and ``asyncio.timeout`` cannot even fire until it returns. So the
rule of ``runs/plugins/scorers.py`` is enforced here: a scorer whose ``score`` is a
plain method runs in the scorer worker pool, awaited under the run's scorer
timeout; only ``async def score`` (waiting on I/O) runs on the loop.

One exception, for speed: a built-in scorer that makes a few linear passes
over its texts (``inline_chars``: exact_match, includes) scores short texts
(an output and expected answers of at most ``INLINE_CHARS`` together) on the
loop. That is microseconds of work, where the hop to a worker thread and back
costs more than the scoring itself; anything longer, or nested, still goes to
the pool.

Threads suffice because what runs in them does not hold the GIL for long: user
patterns go through RE2, which releases it, and the built-in scorers work huge
texts in slices. Work that an input can make unbounded (a JSON Schema, a math
expression) does not run here but in worker processes that are killed at the
timeout (``runs/pools/processes.py``). A timed-out call in a thread cannot be
killed: its thread finishes in the background, holding one worker until then,
so the threads are shared by project (``threads.py``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from runs.plugins.scorers import ScoreOutcome, Scorer
from runs.plugins.steps import Step
from runs.plugins.targets import TargetInput
from runs.pools.shares import Progress, tracking
from runs.pools.threads import run_in_thread, scorer_pool, thread_shares

__all__ = ["ScorerCall", "runs_on_loop", "scorer_pool", "text_size", "thread_shares"]


def runs_on_loop(scorer: Scorer) -> bool:
    """Whether ``scorer`` waits on I/O (``async def score``) rather than computes."""
    own = getattr(scorer, "__dict__", {}).get("score")
    if own is not None:  # set on the instance
        return inspect.iscoroutinefunction(own)
    return _class_runs_on_loop(type(scorer))


@functools.cache
def _class_runs_on_loop(cls: type[Scorer]) -> bool:
    # Once per class: asked for every score of a run, and inspect's answer
    # costs more than scoring a short text.
    return inspect.iscoroutinefunction(cls.score)


class ScorerCall:
    """One call of one scorer; knows what it waits for, if anything."""

    __slots__ = ("item", "output", "progress", "scorer", "steps")

    def __init__(
        self,
        scorer: Scorer,
        output: Any,
        item: TargetInput,
        steps: list[Step] | None = None,
    ) -> None:
        self.scorer = scorer
        self.output = output
        self.item = item
        # The result's trajectory, handed only to a scorer that declares
        # ``needs_steps`` (the others' ``score`` takes no such argument).
        self.steps = steps or []
        # What the call waits for, if anything: a worker thread, or a worker
        # process of a scorer that computes in one (runs/pools/processes.py).
        # Made when the call runs: an inline one waits for nothing.
        self.progress: Progress | None = None

    async def run(self) -> ScoreOutcome:
        self.progress = Progress()
        if runs_on_loop(self.scorer):
            with tracking(self.progress):
                # runs_on_loop: score is a coroutine function.
                outcome = self.call()
                return await cast(Awaitable[ScoreOutcome], outcome)
        with tracking(self.progress):
            return await run_in_thread(self.compute, name=self.scorer.name)

    def inline(self) -> bool:
        """Whether this call is cheap enough for the loop (``inline_chars``)."""
        limit = self.scorer.inline_chars
        if not limit or runs_on_loop(self.scorer) or self.wants_steps:
            return False
        size = text_size(self.output)
        if size is None or size > limit:
            return False
        expected = text_size(self.item.expected)
        return expected is not None and size + expected <= limit

    def compute(self) -> ScoreOutcome:
        """The scorer's work, in this thread."""
        outcome = self.call()
        if inspect.isawaitable(outcome):
            if inspect.iscoroutine(outcome):
                outcome.close()  # never awaited: say so instead of warning at exit
            raise TypeError("score returned an awaitable: declare it async def")
        return outcome

    @property
    def wants_steps(self) -> bool:
        return self.scorer.needs_steps

    def call(self) -> ScoreOutcome | Awaitable[ScoreOutcome]:
        if self.wants_steps:
            # The protocol's signature is the common one; a scorer that
            # declares needs_steps takes ``steps`` as well.
            score = cast(Callable[..., Any], self.scorer.score)
            return score(output=self.output, item=self.item, steps=self.steps)
        return self.scorer.score(output=self.output, item=self.item)

    def timeout_message(self, timeout: float) -> str:
        if self.progress is not None and self.progress.waiting:
            return f"scorer exceeded {timeout:g} s {self.progress.waiting}"
        return f"scorer exceeded {timeout:g} s"


def text_size(value: Any) -> int | None:
    """Characters of a text, a number or a list of them; None for anything
    else (a nested value: its size is not known without walking it)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, int | float):
        return 32
    if isinstance(value, list) and len(value) <= 64:
        total = 0
        for part in value:
            if not isinstance(part, str | int | float) and part is not None:
                return None
            total += len(part) if isinstance(part, str) else 32
        return total
    return None

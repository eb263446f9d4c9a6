"""A scoring pass: a run's stored outputs scored again, the target never called.

The scorers run through the executor's own scoring path (``ItemRunner.score``:
concurrently per item, CPU work in the scorer pool, each under the run's
scorer timeout, one scorer's error never hiding the others), over the run's
succeeded results in pages, at most the run's concurrency of items at once.
Each page's scores are written in one transaction that replaces them by
scorer name, so a pass cut short and run again ends with the same rows.

A process that is shut down leaves its pass running without a heartbeat; it
is then shown as interrupted and may be run again (``runs/rescore/services.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, ClassVar

from channels.db import database_sync_to_async
from django.db import DatabaseError

from runs import events
from runs.calls.pricing import PriceTable, use_prices
from runs.errors import ConfigError
from runs.executor import rescore_store
from runs.executor.engine import HEARTBEAT_INTERVAL, store_figures
from runs.executor.items import ItemRunner
from runs.executor.options import RunOptions
from runs.executor.rescore_store import PassSpec, ToScore
from runs.executor.store import ScoreRecord
from runs.plugins.declaration import TargetContext
from runs.plugins.scorers import (
    Scorer,
    build_scorer,
    conditions_of,
    scorers_prepare,
)
from runs.plugins.targets import TargetInput, TargetOutput
from runs.pools.shares import owner, scoring_for
from runs.secrets.redaction import Redactor
from runs.secrets.store import arun_scorer_contexts

logger = logging.getLogger(__name__)

claim_pass = database_sync_to_async(rescore_store.pass_claim)
heartbeat = database_sync_to_async(rescore_store.pass_heartbeat)
load_page = database_sync_to_async(rescore_store.pass_results_page)
write_scores = database_sync_to_async(rescore_store.pass_scores_write)
finish_pass = database_sync_to_async(rescore_store.pass_finish)


class NoTarget:
    """Stands in for the run's target: a re-score never calls it."""

    kind: ClassVar[str] = "none"

    async def generate(self, item: TargetInput) -> TargetOutput:
        raise RuntimeError("a scoring pass never calls the target")

    async def prepare(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class PassExecution:
    """One execution of a scoring pass in this process."""

    def __init__(self, spec: PassSpec) -> None:
        self.spec = spec
        self.options = RunOptions.from_dict(spec.options)
        self.runner: ItemRunner | None = None

    async def execute(self) -> str:
        scorers: list[Scorer] = []
        try:
            try:
                contexts = await arun_scorer_contexts(
                    self.spec.run_id, self.spec.scorers
                )
                for spec in self.spec.scorers:
                    scorers.append(
                        build_scorer(spec, context=contexts.get(spec["name"]))
                    )
                await scorers_prepare(scorers)
            except ConfigError as exc:
                return await self.finish(error=f"configuration: {exc}")
            return await self.score_with(scorers, contexts)
        finally:
            # A judge holds an HTTP session: every pass closes what it built,
            # as a run's execution does.
            for scorer in scorers:
                await scorer.aclose()

    async def score_with(
        self, scorers: list[Scorer], contexts: dict[str, TargetContext]
    ) -> str:
        self.runner = ItemRunner(
            target=NoTarget(),
            scorers=scorers,
            options=self.options,
            conditions=conditions_of(self.spec.scorers),
            # A judge's reply may echo its key: replaced before it is stored.
            redactor=await asyncio.to_thread(Redactor.of, *contexts.values()),
        )
        beat = asyncio.create_task(self.beat_forever())
        try:
            # Tasks made in here inherit the prices (a judge's cost_of) and
            # the project's share of the scorer workers.
            prices = PriceTable.from_json(self.spec.prices)
            with use_prices(prices), scoring_for(owner(self.spec.project_id)):
                await self.score_all()
        except DatabaseError as exc:
            error = f"storage unavailable: {type(exc).__name__}: {exc}"
            return await self.finish(error=error)
        except Exception as exc:  # the pass must end with its reason recorded
            logger.error("scoring pass %s failed", self.spec.id, exc_info=exc)
            return await self.finish(error=f"{type(exc).__name__}: {exc}")
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        return await self.finish()

    async def score_all(self) -> None:
        slots = asyncio.Semaphore(self.options.concurrency)
        after = 0
        # Conditions on scorers this pass leaves as they are read their scores.
        outside = {
            spec["when"]["scorer"] for spec in self.spec.scorers if spec.get("when")
        } - {spec["name"] for spec in self.spec.scorers}
        assert self.runner is not None
        with_steps = any(scorer.needs_steps for scorer in self.runner.scorers)
        while page := await load_page(
            self.spec.run_id,
            after_id=after,
            conditions_on=outside,
            with_steps=with_steps,
        ):
            scored = await asyncio.gather(
                *(self.score_one(entry, slots) for entry in page)
            )
            await write_scores(self.spec.id, self.spec.run_id, scored)
            await events.publish_run_update(self.spec.run_id)
            after = page[-1].result_id

    async def score_one(
        self, entry: ToScore, slots: asyncio.Semaphore
    ) -> tuple[int, list[ScoreRecord]]:
        assert self.runner is not None
        item = entry.item
        target_input = TargetInput(
            index=item.index,
            external_id=item.external_id,
            input=item.input,
            expected=item.expected,
            metadata=item.metadata or {},
        )
        async with slots:
            return entry.result_id, await self.runner.score(
                entry.output, target_input, stored=entry.stored, steps=entry.steps
            )

    async def beat_forever(self) -> None:
        """Keep the heartbeat fresh while a slow page (a judge) is scored."""
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL)
            try:
                await heartbeat(self.spec.id)
            except DatabaseError as exc:  # the writes decide when storage is gone
                logger.warning(
                    "scoring pass %s: heartbeat failed: %s", self.spec.id, exc
                )

    async def finish(self, *, error: str = "") -> str:
        if self.runner is not None:
            # An error quotes anything, a judge's reply too (as a run's does).
            error = self.runner.redactor.text(error)
        status = await finish_pass(self.spec.id, error=error)
        # Before the page hears of it: it reads the run's stored figures.
        await store_figures(self.spec.run_id)
        await events.publish_run_update(self.spec.run_id)
        return status


async def execute_scoring_pass(
    pass_id: int, *, on_start: Callable[[PassExecution], Any] | None = None
) -> str | None:
    """Execute a scoring pass to its end; returns its final status, or None
    when it is not waiting for an executor (ended, or held by a live one)."""
    spec = await claim_pass(pass_id)
    if spec is None:
        return None
    execution = PassExecution(spec)
    if on_start is not None:
        on_start(execution)
    return await execution.execute()

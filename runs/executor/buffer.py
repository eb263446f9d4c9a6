"""The bounded buffer of finished results between workers and the writer."""

from __future__ import annotations

import asyncio

from runs.executor.store import ResultRecord


class ResultBuffer:
    """Bounded buffer between workers and the single writer."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.records: list[ResultRecord] = []
        self.not_full = asyncio.Condition()

    async def wait_not_full(self) -> None:
        if len(self.records) < self.capacity:
            return  # the usual case: no lock needed on a single event loop
        async with self.not_full:
            await self.not_full.wait_for(lambda: len(self.records) < self.capacity)

    def put(self, record: ResultRecord) -> None:
        # Workers wait for room before they start an item, so a finished item
        # never waits here; at most one item per worker overfills.
        self.records.append(record)

    def __len__(self) -> int:
        return len(self.records)

    async def take(self) -> list[ResultRecord]:
        async with self.not_full:
            batch, self.records = self.records, []
            self.not_full.notify_all()
        return batch

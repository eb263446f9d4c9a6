"""What an item costs its runner, counted in work rather than time: a model
name's price is looked up once, not for every attempt; an attempt's start
and end are logged without formatting a date for each; its deadline is kept
without a timer for each."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from runs.calls.pricing import Price, PriceTable
from runs.executor.clock import IsoClock
from runs.executor.items import ItemRunner, WorkItem
from runs.executor.options import RunOptions
from runs.executor.store import ItemData
from runs.targets import TargetInput, TargetOutput

ITEMS = 100


class CountedPrices(PriceTable):
    """A price table that counts its look-ups of a model's price."""

    def __init__(self, entries: dict[str, Price]) -> None:
        super().__init__(entries)
        self.lookups = 0

    def price(self, model: str | None) -> Price | None:
        self.lookups += 1
        return super().price(model)


class Instant:
    """A target that answers at once with tokens, as the fake endpoint does."""

    async def generate(self, item: TargetInput) -> TargetOutput:
        return TargetOutput(
            output="3",
            prompt_tokens=5,
            completion_tokens=1,
            http_status=200,
            model="bench",
        )


def account_many(prices: PriceTable, model: str) -> list[dict[str, Any]]:
    runner = ItemRunner(
        target=None,  # type: ignore[arg-type]  # only accounting is exercised
        scorers=[],
        options=RunOptions(),
        prices=prices,
        model="configured",
    )
    attempts: list[dict[str, Any]] = []
    for _ in range(ITEMS):
        attempt: dict[str, Any] = {}
        usage = TargetOutput(output="x", prompt_tokens=5, completion_tokens=1)
        usage.model = model
        runner.account(attempt, usage)
        attempts.append(attempt)
    return attempts


def test_an_unpriced_model_is_looked_up_once_not_for_every_attempt():
    prices = CountedPrices({"demo": Price(1.0, 2.0)})
    attempts = account_many(prices, "bench")
    # Its name and the configured one, each once: not three look-ups an attempt.
    assert prices.lookups == 2
    assert (
        attempts[0]
        == attempts[-1]
        == {
            "prompt_tokens": 5,
            "completion_tokens": 1,
            "model": "bench",
        }
    )  # no cost, never zero


def test_a_priced_models_cost_is_the_same_on_every_attempt():
    prices = CountedPrices({"configured": Price(1_000_000.0, 0.0)})
    attempts = account_many(prices, "bench-0613")
    assert {a["cost"] for a in attempts} == {5.0}  # by the configured model
    # The names' search once; then the price of the one found, per attempt.
    assert prices.lookups == 2 + ITEMS


def clock_at(*moments: datetime) -> IsoClock:
    """An IsoClock reading ``moments`` in turn (nanoseconds since the epoch)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    reads = iter((m - epoch) // timedelta(microseconds=1) * 1000 + 999 for m in moments)
    return IsoClock(lambda: next(reads))


def test_the_iso_clock_writes_what_isoformat_writes():
    moments = [
        datetime(2026, 11, 26, 21, 48, 54, 123456, tzinfo=UTC),
        datetime(2026, 11, 26, 21, 48, 54, 999999, tzinfo=UTC),
        datetime(2026, 11, 26, 21, 48, 55, 0, tzinfo=UTC),  # no fraction
        datetime(2026, 11, 26, 21, 48, 55, 7, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
        datetime(2027, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(2028, 2, 29, 12, 0, 0, 0, tzinfo=UTC),
        datetime(2026, 11, 26, 21, 48, 54, 5, tzinfo=UTC),  # a clock set back
    ]
    clock = clock_at(*moments)
    assert [clock() for _ in moments] == [m.isoformat() for m in moments]


def run_counting(
    runner: ItemRunner, counts: Callable[[Any, str, Any], bool]
) -> tuple[list[Any], int]:
    """``ITEMS`` items run one after the other; how many profiler events
    ``counts`` (frame, event, arg) picked out while they ran."""
    works = [
        WorkItem(ItemData(i, i, f"q{i}", "What is 1 + 2?", "3", {}), epoch=1)
        for i in range(ITEMS)
    ]
    counted = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal counted
        if counts(frame, event, arg):
            counted += 1

    async def run_all() -> list[Any]:
        records = [work.new_record() for work in works]
        sys.setprofile(count)
        try:
            for work, record in zip(works, records, strict=True):
                await runner.run(work, record)
        finally:
            sys.setprofile(None)
        return records

    return asyncio.run(run_all()), counted


def test_an_attempt_log_formats_a_date_once_a_second_not_twice_an_attempt():
    runner = ItemRunner(target=Instant(), scorers=[], options=RunOptions())  # type: ignore[arg-type]
    records, formatted = run_counting(
        runner,
        lambda frame, event, arg: (
            event == "c_call" and getattr(arg, "__name__", "") == "isoformat"
        ),
    )
    for record in records:
        (attempt,) = record.attempts
        started = datetime.fromisoformat(attempt["started_at"])
        finished = datetime.fromisoformat(attempt["finished_at"])
        assert started.tzinfo is not None and started <= finished
    # Before: two an attempt (200). Now once for each second the run crossed.
    assert formatted < ITEMS


def test_a_workers_attempts_share_one_timer_not_one_each():
    # asyncio.timeout made a timer for every attempt (loop.call_at), and
    # cancelled it when the attempt ended, long before it would fire.
    runner = ItemRunner(target=Instant(), scorers=[], options=RunOptions())  # type: ignore[arg-type]
    records, timers = run_counting(
        runner,
        lambda frame, event, arg: event == "call" and frame.f_code.co_name == "call_at",
    )
    assert all(r.status == "succeeded" for r in records)
    assert timers == 1  # the worker's one timer, far from due

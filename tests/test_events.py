"""Progress events are paced: a flood of stored batches makes few events, and
the last change and a run's end are always announced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.layers import get_channel_layer

from runs import events

RUN_ID = 4242
FLOOD = 2_000


@pytest.fixture
async def listener() -> AsyncIterator[tuple[Any, str]]:
    """A channel of the run's group on the process's channel layer."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(events.run_group(RUN_ID), channel)
    yield layer, channel
    await layer.group_discard(events.run_group(RUN_ID), channel)
    events.paces.pop(RUN_ID, None)


async def received(layer: Any, channel: str, *, wait: float) -> list[dict[str, Any]]:
    """Every event waiting on ``channel``, and those arriving within ``wait``."""
    got = []
    while True:
        try:
            async with asyncio.timeout(wait):
                got.append(await layer.receive(channel))
        except TimeoutError:
            return got


async def test_a_flood_of_updates_makes_one_event_per_interval_and_the_end_goes_at_once(
    listener: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    layer, channel = listener
    monkeypatch.setattr(events, "PUBLISH_INTERVAL", 3600.0, raising=False)

    for _ in range(FLOOD):
        await events.publish_run_update(RUN_ID)
    flood = await received(layer, channel, wait=0.5)
    await events.publish_run_update(RUN_ID, final=True)
    end = await received(layer, channel, wait=0.5)

    # The first change is announced at once; the others wait for the interval.
    assert [e["final"] for e in flood] == [False]
    # The end does not wait, and nothing is left due after it.
    assert [e["final"] for e in end] == [True]
    assert RUN_ID not in events.paces


async def test_the_last_change_of_a_flood_is_announced_after_the_interval(
    listener: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    layer, channel = listener
    monkeypatch.setattr(events, "PUBLISH_INTERVAL", 0.05, raising=False)

    for _ in range(FLOOD):  # never yields to the loop: one interval
        await events.publish_run_update(RUN_ID)
    first = await received(layer, channel, wait=0)
    # What the flood asked for after its first event comes once, on its own.
    due = [await layer.receive(channel)]
    due += await received(layer, channel, wait=0.5)

    assert [e["final"] for e in first] == [False]
    assert [e["final"] for e in due] == [False]
    assert not events.sending

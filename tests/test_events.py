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


async def arrived(layer: Any, channel: str) -> list[dict[str, Any]]:
    """The first event to come on ``channel`` (however slow the layer) and
    any others arriving within half a second of it."""
    async with asyncio.timeout(60):
        first = await layer.receive(channel)
    return [first, *await received(layer, channel, wait=0.5)]


async def test_a_flood_of_updates_makes_one_event_per_interval_and_the_end_goes_at_once(
    listener: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    layer, channel = listener
    monkeypatch.setattr(events, "PUBLISH_INTERVAL", 3600.0, raising=False)

    for _ in range(FLOOD):
        await events.publish_run_update(RUN_ID)
    flood = await arrived(layer, channel)
    await events.publish_run_update(RUN_ID, final=True)
    end = await arrived(layer, channel)

    # The first change is announced at once; the others wait for the interval.
    assert [e["final"] for e in flood] == [False]
    # The end does not wait, and nothing is left due after it.
    assert [e["final"] for e in end] == [True]
    assert RUN_ID not in events.paces


async def test_the_last_change_of_a_flood_is_announced_after_the_interval(
    listener: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    layer, channel = listener
    monkeypatch.setattr(events, "PUBLISH_INTERVAL", 1.0, raising=False)
    # For each announcement, how many changes had been published when it went
    # out. Sending on a networked channel layer yields to the loop, and on a
    # busy machine may take longer than the interval, so how many go out while
    # the flood lasts depends on the machine; that one goes out after the
    # last change does not.
    made = 0
    sent_after: list[int] = []
    last_told = asyncio.Event()
    send = events.send_run_update

    async def recorded(run_id: int, *, final: bool = False) -> None:
        sent_after.append(made)
        await send(run_id, final=final)
        if made == FLOOD:
            last_told.set()

    monkeypatch.setattr(events, "send_run_update", recorded)

    for _ in range(FLOOD):
        made += 1
        await events.publish_run_update(RUN_ID)
    try:
        async with asyncio.timeout(60):
            await last_told.wait()
    except TimeoutError:
        pytest.fail(f"the last change was never announced: {sent_after}")
    got = await arrived(layer, channel)
    got += await received(layer, channel, wait=0.5)

    assert sent_after[0] == 1, "the first change is announced at once"
    assert sent_after[-1] == FLOOD, f"the last announcement told of {sent_after}"
    assert len(sent_after) < FLOOD // 10, f"{len(sent_after)} events for {FLOOD}"
    assert [e["final"] for e in got] == [False] * len(sent_after)
    assert not events.sending

"""A run's concurrency over all its executors: the leases of each store, and
shards that hold the run's calls in flight to its concurrency together.

Real worker processes are in ``tests/distributed/test_run_concurrency.py``.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from runs.executor import store
from runs.executor.engine import Execution
from runs.executor.shared_limits import (
    Degrading,
    RedisStore,
    RunLeases,
    Store,
)
from runs.models import Run
from runs.testing.fake_openai import FakeOpenAIServer
from tests.executor.conftest import wait_until
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("REDIS_URL", "")


async def close(*stores: Store) -> None:
    for client in stores:
        if isinstance(client, RedisStore):
            await client.aclose()


def test_leases_are_given_to_at_most_their_number_of_holders(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, tuple[int, int], tuple[int, int]]:
        stores = [make_store(), make_store()]
        taken = await asyncio.gather(
            *(
                stores[i % 2].lease_take(key, f"h{i % 2}", [f"l{i}"], 3, 60.0)
                for i in range(10)
            )
        )
        full = await stores[0].lease_take(key, "h0", ["late"], 3, 60.0)
        first = [granted for granted, _ in taken].index(1)
        await stores[1].lease_drop(key, [f"l{first}"])
        after_drop = await stores[0].lease_take(key, "h0", ["late", "later"], 3, 60.0)
        await close(*stores)
        return sum(granted for granted, _ in taken), full, after_drop

    # Two holders; a request for two leases gets the one free.
    assert asyncio.run(scenario()) == (3, (0, 2), (1, 2))


def test_one_request_takes_as_many_leases_as_are_free(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> list[tuple[int, int]]:
        client = make_store()
        answers = [
            await client.lease_take(key, "a", ["1", "2", "3", "4", "5"], 4, 60.0),
            await client.lease_take(key, "b", ["6", "7"], 4, 60.0),
        ]
        await client.lease_drop(key, ["1", "2", "9"])  # 9: never taken
        answers.append(await client.lease_take(key, "b", ["6", "7", "8"], 4, 60.0))
        await close(client)
        return answers

    assert asyncio.run(scenario()) == [(4, 1), (0, 2), (2, 2)]


def test_an_expired_lease_is_free_again_and_a_renewed_one_is_not(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> list[int]:
        first, second = make_store(), make_store()
        # A holder that died: its lease was not renewed in its lifetime (0 s).
        assert await first.lease_take(key, "dead", ["dead"], 2, 0.0) == (1, 1)
        assert (await first.lease_take(key, "alive", ["alive"], 2, 60.0))[0] == 1
        # The dead one's lease is lost: another may take its place.
        assert await first.lease_renew(key, "alive", ["alive", "dead"], 60.0) == (
            1,
            ["dead"],
        )
        taken = [
            (await second.lease_take(key, "new", ["new"], 2, 60.0))[0],  # the dead's
            (await second.lease_take(key, "new", ["more"], 2, 60.0))[0],  # none left
        ]
        await close(first, second)
        return taken

    assert asyncio.run(scenario()) == [1, 0]


def test_a_holder_that_leaves_or_expires_is_no_longer_counted(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> list[int]:
        client = make_store()
        await client.lease_take(key, "a", ["1"], 4, 60.0)
        await client.lease_take(key, "b", ["2"], 4, 60.0)
        counts = [(await client.lease_renew(key, "c", [], 60.0))[0]]  # a, b and c
        await client.lease_leave(key, "b", ["2"])
        counts.append((await client.lease_renew(key, "a", ["1"], 60.0))[0])  # a, c
        await client.lease_renew(key, "c", [], 0.0)  # c stops renewing: expired
        granted, holders = await client.lease_take(
            key, "a", ["3", "4", "5", "6"], 4, 60.0
        )
        await close(client)
        return [*counts, holders, granted]

    # b's lease came back with it, a's "1" stays: 3 of 4 places free for a.
    assert asyncio.run(scenario()) == [3, 2, 1, 3]


async def calls_holding(
    holders: list[RunLeases], count: int, *, pause: float
) -> tuple[int, int]:
    """``count`` calls at once, the n-th through holder n (round the list),
    each holding a lease for ``pause`` seconds: the most held at once, and
    how many calls ended."""
    active = peak = calls = 0

    async def call(number: int) -> None:
        nonlocal active, peak, calls
        holder = holders[number % len(holders)]
        lease = await holder.take()
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(pause)
        active -= 1
        calls += 1
        holder.give_back(lease)

    await asyncio.gather(*(call(n) for n in range(count)))
    return peak, calls


def test_callers_wait_for_a_lease_given_back(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, int, int]:
        leases = [RunLeases(Degrading(make_store(), 1), key, 2, 60.0) for _ in range(2)]
        peak, calls = await calls_holding(leases, 12, pause=0)
        for holder in leases:
            await holder.aclose()
            await holder.store.aclose()
        return peak, calls, sum(len(holder.held) for holder in leases)

    peak, calls, held = asyncio.run(scenario())
    assert (peak <= 2, calls, held) == (True, 12, 0)


class Counting:
    """A store's calls, counted by method."""

    def __init__(self, store: Degrading) -> None:
        self.store = store
        self.calls: Counter[str] = Counter()

    async def call(self, method: str, *args: Any) -> Any:
        self.calls[method] += 1
        return await self.store.call(method, *args)

    async def aclose(self) -> None:
        await self.store.aclose()


def test_an_executors_calls_reuse_its_leases_without_asking_the_store(
    make_store,
) -> None:
    # Each call took a lease from the store and gave it back to it (two round
    # trips a call, one at a time): 64 calls made 128 requests or more.
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, int, Counter[str]]:
        store = Counting(Degrading(make_store(), 1))
        leases = RunLeases(store, key, 8, 60.0)
        peak, calls = await calls_holding([leases], 64, pause=0.001)
        await leases.aclose()
        await store.aclose()
        return peak, calls, store.calls

    peak, calls, requests = asyncio.run(scenario())
    assert (peak, calls) == (8, 64)
    assert sum(requests.values()) <= 10, requests


def test_an_executor_above_its_share_gives_leases_back_to_a_newcomer(
    make_store,
) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, int, int]:
        first, second = (
            RunLeases(Degrading(make_store(), 1), key, 4, 60.0) for _ in "ab"
        )
        stop = asyncio.Event()
        most = 0

        async def calls(leases: RunLeases) -> None:
            nonlocal most
            while not stop.is_set():
                lease = await leases.take()
                most = max(most, len(first.held) + len(second.held))
                await asyncio.sleep(0.005)
                leases.give_back(lease)

        early = [asyncio.ensure_future(calls(first)) for _ in range(8)]
        await wait_until(lambda: len(first.held) == 4, "the first takes every lease")
        await second.renew()  # the newcomer joins the run's holders ...
        await first.renew()  # ... which the first learns at its next renewal
        late = [asyncio.ensure_future(calls(second)) for _ in range(8)]
        await wait_until(lambda: len(second.held) == 2, "the newcomer's share")
        stop.set()
        await asyncio.gather(*early, *late)
        holders = first.holders
        for leases in (first, second):
            await leases.aclose()
            await leases.store.aclose()
        return holders, first.share, most

    assert asyncio.run(scenario()) == (2, 2, 4)


def test_a_lease_that_expired_while_held_is_passed_to_no_other_call(
    make_store,
) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[list[str], bool, int]:
        client = make_store()
        leases = RunLeases(Degrading(client, 1), key, 1, 60.0)
        lease = await leases.take()
        # This executor stalled past the lease's lifetime: it expired, and
        # another executor took the run's one place.
        await client.lease_drop(key, [lease])
        assert (await client.lease_take(key, "other", ["x"], 1, 60.0))[0] == 1
        leases.renewed = float("-inf")  # its renewal is due
        await leases.renew()
        waiter = asyncio.ensure_future(leases.take())
        await asyncio.sleep(0.05)  # it asks the store, which is full
        leases.give_back(lease)  # the call holding the lost lease ends
        await asyncio.sleep(0.05)
        served = waiter.done()
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        await leases.aclose()
        await leases.store.aclose()
        return sorted(leases.held), served, leases.holders

    assert asyncio.run(scenario()) == ([], False, 2)


def test_shards_of_a_run_hold_its_calls_to_its_concurrency_together(
    make_run: Callable[..., Run], fake_openai: FakeOpenAIServer
) -> None:
    # Four shards of concurrency 3 each would hold 12 calls at once.
    fake_openai.latency_ms = 20
    run = make_run(arithmetic_items(48), concurrency=3)

    async def together() -> list[str]:
        spec = await database_sync_to_async(store.run_claim)(run.pk)
        assert spec is not None
        ranges = [(0, 12), (12, 24), (24, 36), (36, 48)]
        shards = [Execution(spec, index_range=r) for r in ranges]
        return list(await asyncio.gather(*(s.execute() for s in shards)))

    asyncio.run(together())
    connection.close()  # the threads' connections are not this one

    run.refresh_from_db()
    assert run.succeeded == 48
    assert fake_openai.stats.max_in_flight <= 3

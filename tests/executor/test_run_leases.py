"""A run's concurrency over all its executors: the leases of each store, and
shards that hold the run's calls in flight to its concurrency together.

Real worker processes are in ``tests/distributed/test_run_concurrency.py``.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable

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
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("REDIS_URL", "")


async def close(*stores: Store) -> None:
    for client in stores:
        if isinstance(client, RedisStore):
            await client.aclose()


def test_leases_are_given_to_at_most_their_number_of_holders(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, bool, bool]:
        stores = [make_store(), make_store()]
        taken = await asyncio.gather(
            *(stores[i % 2].lease_take(key, f"l{i}", 3, 60.0) for i in range(10))
        )
        full = await stores[0].lease_take(key, "late", 3, 60.0)
        await stores[1].lease_drop(key, [f"l{i}" for i in range(10)][taken.index(1)])
        after_drop = await stores[0].lease_take(key, "late", 3, 60.0)
        await close(*stores)
        return sum(taken), full, after_drop

    assert asyncio.run(scenario()) == (3, False, True)


def test_an_expired_lease_is_free_again_and_a_renewed_one_is_not(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> list[bool]:
        first, second = make_store(), make_store()
        # A holder that died: its lease was not renewed in its lifetime (0 s).
        assert await first.lease_take(key, "dead", 2, 0.0)
        assert await first.lease_take(key, "alive", 2, 60.0)
        await first.lease_renew(key, ["alive"], 60.0)
        taken = [
            await second.lease_take(key, "new", 2, 60.0),  # the dead one's
            await second.lease_take(key, "more", 2, 60.0),  # none left
        ]
        await close(first, second)
        return taken

    assert asyncio.run(scenario()) == [True, False]


def test_callers_wait_for_a_lease_given_back(make_store) -> None:
    key = f"test:{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, int, int]:
        leases = [RunLeases(Degrading(make_store(), 1), key, 2, 60.0) for _ in range(2)]
        active = peak = calls = 0

        async def call(number: int) -> None:
            nonlocal active, peak, calls
            holder = leases[number % 2]
            lease = await holder.take()
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0)
            active -= 1
            calls += 1
            holder.give_back(lease)

        await asyncio.gather(*(call(n) for n in range(12)))
        for holder in leases:
            await holder.aclose()
            await holder.store.aclose()
        return peak, calls, sum(len(holder.held) for holder in leases)

    peak, calls, held = asyncio.run(scenario())
    assert (peak <= 2, calls, held) == (True, 12, 0)


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

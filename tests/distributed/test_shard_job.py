"""The shard job itself, in this process: what a crash of its executor ends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from runs.executor import distributed, shard_store
from runs.models import Project, RunShard, RunStatus
from tests.factories import arithmetic_items, echo_run, make_dataset


class _Context:
    """What the job reads of procrastinate's JobContext: no abort asked."""

    def abort_reason(self) -> None:
        return None


def run_job(shard: RunShard) -> None:
    """The shard's job, as a worker runs it."""
    asyncio.run(
        distributed.execute_shard.func(
            _Context(),
            run_id=shard.run_id,
            shard_id=shard.pk,
            start=shard.start,
            stop=shard.stop,
        )
    )


@pytest.mark.django_db(transaction=True)
def test_a_crash_after_a_takeover_leaves_the_shard_to_its_new_holder(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = echo_run(make_dataset(project, arithmetic_items(10)))
    (shard,) = shard_store.shards_replace(run.pk, [(0, 10)]) or []
    # This worker was seen as stalled; another took the shard over.
    shard_store.shard_claim(shard.pk, executor_id="other-host:1:taken")

    async def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in this worker's execution")

    monkeypatch.setattr(distributed, "execute_run", crash)
    with pytest.raises(RuntimeError):
        run_job(shard)
    connection.close()  # the job's thread had its own

    shard.refresh_from_db()
    run.refresh_from_db()
    # The worker that holds it now goes on; the run is neither stopped nor failed.
    assert (shard.status, shard.worker) == (
        RunShard.Status.RUNNING,
        "other-host:1:taken",
    )
    assert (run.status, run.error) == (RunStatus.RUNNING, "")
    assert shard_store.run_signal(run.pk) == shard_store.RunSignal()


@pytest.mark.django_db(transaction=True)
def test_a_crash_of_the_shards_holder_stops_the_run_with_its_error(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = echo_run(make_dataset(project, arithmetic_items(10)))
    (shard,) = shard_store.shards_replace(run.pk, [(0, 10)]) or []

    async def claim_then_crash(*args: Any, shard_id: int, **kwargs: Any) -> None:
        await database_sync_to_async(shard_store.shard_claim)(shard_id)
        raise RuntimeError("a bug in this worker's execution")

    monkeypatch.setattr(distributed, "execute_run", claim_then_crash)
    with pytest.raises(RuntimeError):
        run_job(shard)
    connection.close()

    shard.refresh_from_db()
    run.refresh_from_db()
    assert shard.status == RunShard.Status.STOPPED
    assert run.status == RunStatus.FAILED
    assert run.error == "executor error: RuntimeError: a bug in this worker's execution"

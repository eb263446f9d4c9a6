"""A cost sample in the distributed mode is a worker's work, over its few items
alone: the web process that asked for it executes nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from runs.estimates.services import estimate_sample
from runs.executor.store import EXECUTOR_ID
from runs.models import Project, Result
from tests.distributed.workers import Workers, wait_final
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

DEMO = {"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 0}


def test_a_cost_sample_is_executed_by_a_worker(
    workers: Workers, distributed: None, project: Project, alice: User
) -> None:
    dataset = make_dataset(project, arithmetic_items(30))
    (worker,) = workers.start(1)
    workers.wait_registered(1)
    run = estimate_sample(
        user=alice, dataset=dataset, target_kind="demo", target_config=DEMO,
        scorers=["exact_match"], items=4,
    )  # fmt: skip
    run = wait_final(run)
    assert (run.status, run.total, run.processed) == ("completed", 4, 4)
    assert Result.objects.filter(run=run).count() == 4
    (shard,) = run.shards.all()
    assert (shard.start, shard.stop, shard.status) == (0, 4, "done")
    # Claimed by the worker's process, not this one (the web server's part).
    assert shard.worker.split(":")[1] == str(worker.pid)
    assert shard.worker != EXECUTOR_ID

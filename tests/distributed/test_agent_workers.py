"""An agent run over worker subprocesses, one of them killed in the middle:
every result stored once, with its whole trajectory, no step doubled."""

from __future__ import annotations

import pytest
from django.db.models import Count

from runs.demo.seed import DEMO_AGENT_TOOLS
from runs.models import Project, Result, RunStatus, Step
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.distributed.workers import SHARD_SIZE, Workers, wait_final
from tests.factories import make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

# Two rounds of one tool call, then the final answer: three model calls and
# three tool calls.
STEPS = 6


def test_a_sigkilled_workers_agent_items_are_stored_once_with_their_steps(
    workers: Workers, project: Project, fake_openai: FakeOpenAIServer, distributed: None
) -> None:
    items = [
        {
            "input": f"What is {n} + 1? [[agent]] [[agent_rounds:2]] [[latency:150]]",
            "expected": str(n + 1),
        }
        for n in range(12 * SHARD_SIZE)
    ]
    workers.start_registered(3)
    run = run_create(
        user=None,
        dataset=make_dataset(project, items),
        target_kind="agent",
        target_config={
            "base_url": fake_openai.base_url,
            "model": "fake",
            "tools": DEMO_AGENT_TOOLS,
        },
        scorers=["exact_match"],
        options={"concurrency": 4, "backoff_base_seconds": 0.01},
    )
    workers.kill_shard_holder(run)

    wait_final(run, seconds=120)
    assert run.status == RunStatus.COMPLETED
    assert run.succeeded == run.total == len(items)
    results = Result.objects.filter(run=run)
    assert results.count() == len(items)
    rows = list(results.values_list("item_id", "epoch"))
    assert len(rows) == len(set(rows))
    # Every result has its whole trajectory, once: no step doubled or lost.
    counts = set(results.annotate(n=Count("steps")).values_list("n", flat=True))
    assert counts == {STEPS}
    assert Step.objects.filter(result__run=run).count() == STEPS * len(items)
    assert Step.objects.filter(result__run=run, kind="tool", error="").count() == (
        3 * len(items)
    )

"""No scorer of one run holds a shared worker past its timeout, nor every one
of them: a slow validation is killed, and a project whose scorers overrun
waits for itself while another project's run scores."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any, ClassVar

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from runs.executor.engine import execute_run
from runs.executor.items import ItemRunner
from runs.executor.options import RunOptions
from runs.models import Project, RunStatus, Score
from runs.plugins.scoring import thread_shares
from runs.pools.processes import JSON, pool_size, work_pool
from runs.pools.shares import owner, scoring_for
from runs.scorers import base, build_scorer, clean_scorer_specs
from runs.targets import TargetInput
from tests.executor.conftest import wait_until
from tests.factories import make_dataset
from tests.scorers.scoring import branching_chain

pytestmark = pytest.mark.django_db(transaction=True)

# Bounds on waits for state (never on how long something took).
WAIT_SECONDS = 30.0


def item() -> TargetInput:
    return TargetInput(index=0, external_id="x", input="q", expected=None)


def runner(spec: dict[str, Any], *, timeout: float) -> ItemRunner:
    return ItemRunner(
        target=None,  # type: ignore[arg-type]  # only scoring is exercised
        scorers=[build_scorer(clean_scorer_specs([spec])[0])],
        options=RunOptions(scorer_timeout_seconds=timeout),
    )


async def score_as(who: str, scoring: ItemRunner, output: Any) -> Any:
    with scoring_for(who):
        [record] = await scoring.score(output, item())
    return record


# Within every limit (2^11 evaluations of one value), but each number of an
# output takes a long while: validating this one runs for minutes.
SLOW = {"kind": "json", "params": {"schema": branching_chain(11, array=True)}}
STALLING = json.dumps([1] * 600)


async def test_a_slow_validation_is_killed_at_the_timeout_and_the_workers_serve_again():
    workers = settings.EVALSITE_SCORER_WORKERS
    stalled = runner(SLOW, timeout=0.5)
    records = await asyncio.gather(
        *(score_as(f"p{n}", stalled, STALLING) for n in range(workers))
    )
    assert [record.error[:21] for record in records] == ["scorer exceeded 0.5 s"] * (
        workers
    )
    assert all(record.value is None for record in records)

    # The validations were killed: the next ones, from every project at once,
    # find their workers free (a string matches the first branch at once).
    scoring = runner(SLOW, timeout=WAIT_SECONDS)
    records = await asyncio.gather(
        *(score_as(f"p{n}", scoring, '["a", "b"]') for n in range(workers))
    )
    assert [(record.error, record.passed) for record in records] == [
        ("", True)
    ] * workers


async def test_a_project_holds_only_its_share_of_the_validation_processes():
    _, shares = work_pool(JSON)
    hog = runner(SLOW, timeout=WAIT_SECONDS * 10)
    # More slow validations than there are processes, all from one project.
    hogging = [
        asyncio.ensure_future(score_as("hog", hog, STALLING))
        for _ in range(pool_size() + 1)
    ]
    try:
        await wait_until(
            lambda: shares.held("hog") == shares.limit,
            "the hog's validations holding its share of the processes",
        )
        record = await score_as("other", runner(SLOW, timeout=WAIT_SECONDS), '["a"]')
    finally:
        for task in hogging:
            task.cancel()  # the processes are killed
        await asyncio.gather(*hogging, return_exceptions=True)
    assert (record.error, record.passed) == ("", True)
    assert shares.limit < pool_size()


class HoggingScorer(base.ScorerPlugin):
    """CPU work that does not return until released: a thread held past its
    timeout, which nothing can stop."""

    kind = "hogging_for_test"
    label = "Hogging"
    release: ClassVar[threading.Event] = threading.Event()
    inside: ClassVar[int] = 0
    lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name

    def score(self, *, output: Any, item: TargetInput) -> base.ScoreOutcome:
        with self.lock:
            type(self).inside += 1
        try:
            self.release.wait(WAIT_SECONDS)
        finally:
            with self.lock:
                type(self).inside -= 1
        return base.ScoreOutcome(1.0, True, "released")


@pytest.fixture
def hogging(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setitem(base.REGISTRY, HoggingScorer.kind, HoggingScorer)
    HoggingScorer.release.clear()
    yield HoggingScorer
    HoggingScorer.release.set()  # give the worker threads back
    deadline = time.monotonic() + WAIT_SECONDS
    while HoggingScorer.inside and time.monotonic() < deadline:
        time.sleep(0.02)


async def test_while_one_projects_scorers_overrun_another_projects_run_scores(
    make_run, other_project: Project, hogging: Any, caplog: pytest.LogCaptureFixture
):
    hog = await sync_to_async(make_run)(
        [{"input": f"q{n}", "expected": "x"} for n in range(8)],
        scorers=[hogging.kind],
        scorer_timeout_seconds=0.2,
        concurrency=8,
    )
    items = [{"input": f"{n} + 0 =", "expected": str(n)} for n in range(6)]
    dataset = await sync_to_async(make_dataset)(other_project, items)
    other = await sync_to_async(make_run)(
        items, dataset=dataset, scorers=["numeric"], scorer_timeout_seconds=10
    )

    # Every scorer call of the hog has timed out; the threads it got are
    # still held, and will be until released.
    with caplog.at_level(logging.WARNING, logger="runs.pools.shares"):
        await execute_run(hog.pk)
    assert await execute_run(other.pk) == RunStatus.COMPLETED

    scores = [s async for s in Score.objects.filter(result__run=other)]
    assert [(s.error, s.passed) for s in scores] == [("", True)] * len(items)
    shares = thread_shares()
    hogged = owner(hog.project_id)
    assert hogging.inside == shares.overrunning(hogged) == shares.limit
    assert shares.limit < settings.EVALSITE_SCORER_WORKERS
    assert "overran its timeout" in caplog.text
    waited = (
        "scorer exceeded 0.2 s waiting for a free scorer worker: this project's "
        f"runs already use {shares.limit} of the "
        f"{settings.EVALSITE_SCORER_WORKERS}, the most one project may"
    )
    errors = [s.error async for s in Score.objects.filter(result__run=hog)]
    assert errors.count("scorer exceeded 0.2 s") == shares.limit
    assert sum(error.startswith(waited) for error in errors) == 8 - shares.limit

    hogging.release.set()
    await wait_until(
        lambda: shares.overrunning(hogged) == 0 == shares.held(hogged),
        "the hog's threads returned and counted free",
    )

"""A run whose results have every status, stored as the executor stores them."""

from __future__ import annotations

import asyncio

from django.utils import timezone

from runs.executor import store
from runs.executor.engine import execute_run
from runs.executor.store import ResultRecord, ScoreRecord
from runs.models import Dataset, ErrorKind, Item, Project, Run
from runs.records.signatures import error_signature
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import arithmetic_items, make_dataset

# index: (status, error kind, error label, exact_match score as (passed, error));
# results of one label share an error message, so they make one cluster.
MIXED = {
    0: ("succeeded", "", "", (True, "")),
    1: ("succeeded", "", "", (True, "")),
    2: ("succeeded", "", "", (False, "")),
    3: ("succeeded", "", "", (None, "ValueError: boom")),
    4: ("failed", ErrorKind.TRANSIENT, "sig-a", None),
    5: ("failed", ErrorKind.TRANSIENT, "sig-a", None),
    6: ("timed_out", ErrorKind.TIMEOUT, "sig-b", None),
}
MESSAGES = {"sig-a": "connection reset by peer", "sig-b": "read timed out"}
UNSTORED = (7, 8, 9)  # of the ten items of the ``dataset`` fixture
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


def cluster_key(label: str) -> str:
    """The cluster key of the results of an error label of MIXED."""
    kind = {"sig-a": ErrorKind.TRANSIENT, "sig-b": ErrorKind.TIMEOUT}[label]
    return error_signature(
        kind=kind, error_type="HTTP 500", message=MESSAGES[label]
    ).signature


def mixed_run(dataset: Dataset, *, ended: bool = False) -> Run:
    """A run of ``dataset`` with the MIXED results stored; the rest pending
    (or skipped, once ``ended``: cancelled)."""
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="openai_chat",
        target_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        scorers=["exact_match"],
        options={"max_attempts": 2},
        launch=False,
    )
    now = timezone.now()
    records = []
    for item in Item.objects.filter(dataset=dataset, index__in=MIXED):
        status, kind, signature, score = MIXED[item.index]
        scores = []
        if score is not None:
            passed, error = score
            value = None if error else float(passed)
            scores = [ScoreRecord("exact_match", value, passed, error=error)]
        records.append(
            ResultRecord(
                item_id=item.pk,
                item_index=item.index,
                epoch=0,
                status=status,
                output="out" if status == "succeeded" else None,
                attempts=[{"number": 1, "outcome": "ok" if not kind else "error"}],
                started_at=now,
                finished_at=now,
                error_kind=kind,
                error_type="HTTP 500" if kind else "",
                error_message=MESSAGES[signature] if kind else "",
                scores=scores,
            )
        )
    store.results_write(run.pk, records)
    if ended:
        store.run_finish(run.pk, cancelled=True)
    run.refresh_from_db()
    return run


def ended_run_with_two_failures(project: Project, server: FakeOpenAIServer) -> Run:
    """An ended run of five items against ``server`` whose items 1 and 3 failed
    once (a retry of them succeeds)."""
    items = arithmetic_items(5)
    for index in (1, 3):
        items[index]["input"] += "[[flaky:1]]"  # fails once, then answers
    run = run_create(
        user=None,
        dataset=make_dataset(project, items),
        target_kind="openai_chat",
        target_config={"base_url": server.base_url, "model": "fake"},
        scorers=["exact_match"],
        options={**FAST, "max_attempts": 1},
        launch=False,
    )
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    assert (run.failed, run.succeeded) == (2, 3)
    return run

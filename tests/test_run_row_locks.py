"""A run's row is locked FOR NO KEY UPDATE, never FOR UPDATE (PostgreSQL).

Every row derived from a run (its results, scores, stored figures...)
points at it by a foreign key, which Django declares DEFERRABLE INITIALLY
DEFERRED: the check that the run exists runs when the inserting
transaction commits, and takes a KEY SHARE lock on the run's row. FOR
UPDATE conflicts with KEY SHARE; FOR NO KEY UPDATE does not, and still
excludes every other lock of the row for an update (it is what an UPDATE
that keeps the key takes). With FOR UPDATE, a transaction holding the run
(a re-score, a retry, a shard's end) that then inserted a derived row
another process had just inserted uncommitted (the figures a worker stores
when the run ends) waited for that process, which waited at its commit for
the run: a deadlock, one of them failed (seen in the suite, the re-score
of a run its worker had just ended).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from runs.models import Project, Run, RunFigures, ScoringPass
from runs.rescore.services import run_rescore
from tests.analysis.test_summary_running import PASSED
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes

RUNS = Path(__file__).resolve().parents[1] / "runs"


def waiting_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        )
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


@pytest.mark.django_db(transaction=True)
def test_a_rescore_and_figures_stored_by_another_process_do_not_deadlock(
    project: Project,
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks and deferred foreign keys")
    dataset = make_dataset(project, arithmetic_items(3))
    run = store_outcomes(echo_run(dataset), [PASSED] * 3)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.COMPLETED, finished_at=timezone.now()
    )
    run = Run.objects.get(pk=run.pk)
    cache.clear()
    connection.ensure_connection()
    rescoring_pid = connection.connection.info.backend_pid
    inserted = threading.Event()
    outcome: list[object] = []

    def worker_stores_the_figures() -> None:
        try:
            with transaction.atomic():
                RunFigures.objects.create(
                    run_id=run.pk,
                    version="stored by the worker",
                    computed_at=timezone.now(),
                    data={},
                    compute_seconds=0.0,
                )
                inserted.set()
                # Commit once the re-score waits for this row: then the
                # commit's check of the run's key meets the re-score's lock.
                deadline = time.monotonic() + 60
                while not waiting_on_a_lock(rescoring_pid):
                    assert time.monotonic() < deadline, "the re-score never waited"
                    time.sleep(0.01)
            outcome.append("committed")
        except Exception as exc:  # the test's verdict, below
            outcome.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=worker_stores_the_figures)
    worker.start()
    assert inserted.wait(60), "the worker never inserted"
    try:
        plan = run_rescore(
            run=run,
            user=None,
            scorers=[{"kind": "includes", "name": "has"}],
            launch=False,
        )
    finally:
        worker.join(60)

    assert outcome == ["committed"]
    assert plan.scoring_pass is not None
    assert ScoringPass.objects.filter(run=run, initial=True).count() == 1
    assert RunFigures.objects.get(run=run).version == "stored by the worker"


def test_every_lock_of_a_runs_row_keeps_its_key() -> None:
    locks = re.compile(r"Run\.objects\.select_for_update\(([^)]*)\)")
    found = [
        (path.relative_to(RUNS.parent), match.group(1))
        for path in RUNS.rglob("*.py")
        for match in locks.finditer(path.read_text())
    ]
    assert found, "no lock of a run's row found: the pattern is out of date"
    assert [lock for lock in found if lock[1] != "no_key=True"] == []

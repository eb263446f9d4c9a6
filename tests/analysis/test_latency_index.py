"""The results' latency index became (run, status) (migration 0039): a going
run's latencies, read in a statement of their own, against its status
counts; and the migration's locks on a table of results."""

from __future__ import annotations

import importlib
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import AddIndex
from django.utils import timezone

from runs.analysis import summary
from runs.models import Project, Result, Run, RunStatus
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes

pytestmark = pytest.mark.django_db

PASSED = {"scores": [("exact_match", True, "")]}


@pytest.fixture
def running(project: Project) -> Run:
    run = echo_run(make_dataset(project, arithmetic_items(20), name="live"))
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    run = store_outcomes(run, [PASSED] * 5)
    Result.objects.filter(run=run).update(latency_ms=10.0, time_to_result_ms=12.0)
    run.refresh_from_db()
    return run


def test_a_batch_stored_meanwhile_never_gives_more_latencies_than_answers(
    running: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor stores 5 more answered results (with their latencies)
    just after the summary counted the run's results by status."""
    totals = summary._totals
    landed: list[bool] = []

    def counted_then_stored(run: Run) -> Any:
        found = totals(run)
        if not landed:
            landed.append(True)
            store_outcomes(Run.objects.get(pk=running.pk), [PASSED] * 5, offset=5)
            Result.objects.filter(run=running, latency_ms__isnull=True).update(
                latency_ms=20.0, time_to_result_ms=25.0
            )
        return found

    monkeypatch.setattr(summary, "_totals", counted_then_stored)

    figures = summary.run_summary(run=running)

    # With the old index, both counts came from one aggregate: latency_count
    # could never exceed the answered results it is "of" (the page shows both).
    assert figures.latency_count <= figures.counts["succeeded"]
    assert figures.time_to_result_count <= figures.counts["succeeded"]


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's table locks"
)
def test_the_results_stay_readable_while_the_new_index_is_built() -> None:
    """Migration 0039 on PostgreSQL: whatever runs before its CREATE INDEX
    (in the migration's one transaction) must not hold a lock that stops the
    dashboard reading runs_result during the build (minutes on a big table).
    DROP INDEX takes ACCESS EXCLUSIVE on the table until the commit."""
    module = importlib.import_module("runs.migrations.0039_result_status_index")
    operations = module.Migration.operations
    build = next(i for i, op in enumerate(operations) if isinstance(op, AddIndex))
    state = MigrationLoader(connection).project_state(("runs", "0038_score_tallies"))
    settings = connection.settings_dict
    with transaction.atomic():
        with connection.cursor() as cursor:  # the index 0038 leaves
            cursor.execute(
                'CREATE INDEX IF NOT EXISTS "runs_result_run_id_5b5f0b_idx"'
                ' ON "runs_result" ("run_id", "status", "latency_ms")'
            )
        with connection.schema_editor(atomic=False, collect_sql=False) as editor:
            for operation in operations[:build]:
                after = state.clone()
                operation.state_forwards("runs", after)
                operation.database_forwards("runs", editor, state, after)
                state = after
        # Another connection (a page view) reads the results meanwhile.
        other = psycopg.connect(
            dbname=settings["NAME"],
            user=settings["USER"],
            host=settings["HOST"] or None,
            port=settings["PORT"] or None,
            password=settings["PASSWORD"] or None,
            autocommit=True,
        )
        try:
            other.execute("SET lock_timeout = '500ms'")
            other.execute("SELECT count(*) FROM runs_result")
        except psycopg.errors.LockNotAvailable:
            pytest.fail("runs_result is locked against reads before the build")
        finally:
            other.close()
            transaction.set_rollback(True)

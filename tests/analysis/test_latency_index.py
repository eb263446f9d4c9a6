"""The results' latency index became (run, status) (migration 0039): the
migration's locks on a table of results. (A going run's latencies against
its status counts: test_summary_running.py.)"""

from __future__ import annotations

import importlib

import psycopg
import pytest
from django.db import connection, transaction
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import AddIndex

pytestmark = pytest.mark.django_db


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

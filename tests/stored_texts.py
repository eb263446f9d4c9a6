"""Every text a run leaves in the database or its export, to look for a secret;
and the secrets put there."""

from __future__ import annotations

from typing import Any

from django.db import connection

from runs.analysis.export import run_export_lines
from runs.models import Project, Run
from tests.factories import set_bound_secret


def stored_text(run: Run) -> str:
    """What the database holds of the run's results, their scores and steps,
    and its error, as stored (the raw columns, not what a model field makes
    of them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT output, attempts, error_message, error_type, model "
            "FROM runs_result WHERE run_id = %s",
            [run.pk],
        )
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT s.reason, s.error, s.model FROM runs_score s "
            "JOIN runs_result r ON s.result_id = r.id WHERE r.run_id = %s",
            [run.pk],
        )
        rows += cursor.fetchall()
        cursor.execute(
            "SELECT s.name, s.model, s.call_id, s.arguments, s.output, s.error, "
            "s.error_type FROM runs_step s "
            "JOIN runs_result r ON s.result_id = r.id WHERE r.run_id = %s",
            [run.pk],
        )
        rows += cursor.fetchall()
        cursor.execute("SELECT error FROM runs_run WHERE id = %s", [run.pk])
        rows.append(cursor.fetchone())
    return "\n".join(str(cell) for row in rows for cell in row)


def exported_text(run: Run) -> str:
    """The run's export, as JSON lines and as CSV."""
    return "".join(
        [
            *run_export_lines(run=run, format="jsonl"),
            *run_export_lines(run=run, format="csv"),
        ]
    )


def store_secret(
    project: Project, user: Any, name: str, value: str, *, url: str
) -> None:
    """A project secret for a target or judge that calls ``url``."""
    set_bound_secret(project, user, name, value, url=url)

"""Each result's attempt count, kept by the rows' writer: the summary, the
charts' timeline and the export count retried results from it, and parse a
result's attempt log only where the count is missing (rows stored before it
was kept)."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management import call_command
from django.db import connection

from runs.analysis.charts import completion_timeline
from runs.analysis.export import run_export_rows
from runs.analysis.summary import run_summary
from runs.executor.store import results_write
from runs.models import Dataset, Item, Result, Run
from runs.records.rows import retry_mark
from tests.analysis.test_summary_attempts import (
    QUICK,
    SLOW,
    attempt,
    finished_run,
    record,
)

TIMED_OUT = [attempt(1, 0, 60, "timeout")]
# A transient failure, then an answer; and an answer at once.
RETRIED = [attempt(1, 0, 1, "transient"), attempt(2, 3, 4)]


def stored_counts(run: Run) -> list[tuple[int | None, int]]:
    """(stored count, length of the log) of each result, in item order."""
    return [
        (made, len(log))
        for made, log in Result.objects.filter(run=run)
        .order_by("item_index")
        .values_list("attempts_made", "attempts")
    ]


def figures(run: Run) -> dict[str, Any]:
    """What is counted from the attempt counts: the summary's retried
    results, the timeline's retried series, each exported row's attempts."""
    summary = run_summary(run=run)
    timeline = completion_timeline(run=run, summary=summary)
    assert timeline is not None
    return {
        "retried": summary.retried,
        "timeline": timeline["retried"],
        "export": [row["attempts"] for row in run_export_rows(run=run)],
    }


def test_the_writer_stores_each_results_attempt_count(dataset: Dataset) -> None:
    run = finished_run(dataset, [SLOW, *QUICK, TIMED_OUT])

    assert stored_counts(run) == [(2, 2), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1)]


def test_a_retry_counts_the_attempts_of_both_rounds(dataset: Dataset) -> None:
    # The first result timed out: the retry's answer replaces it. The second
    # was answered (no score): it keeps its answer, and its log the retry's
    # attempt too, though no attempt of it failed.
    run = finished_run(dataset, [TIMED_OUT, QUICK[0]])
    retry_mark(Result.objects.filter(run=run))
    items = list(Item.objects.filter(dataset=dataset).order_by("index"))

    results_write(run.pk, [record(items[0], RETRIED), record(items[1], QUICK[0])])

    assert stored_counts(run) == [(3, 3), (2, 2)]
    assert list(
        Result.objects.filter(run=run)
        .order_by("item_index")
        .values_list("status", "failed_attempts")
    ) == [("succeeded", 2), ("succeeded", 0)]
    assert figures(run)["retried"] == 2


def test_rows_stored_before_the_count_are_counted_from_their_logs(
    dataset: Dataset,
) -> None:
    run = finished_run(dataset, [SLOW, RETRIED, *QUICK, TIMED_OUT])
    logs = list(
        Result.objects.filter(run=run).order_by("item_index").values_list("attempts")
    )
    reference = sum(len(log) > 1 for (log,) in logs)  # counted here, in Python

    counted = figures(run)
    Result.objects.filter(run=run).update(attempts_made=None)
    from_logs = figures(run)

    assert reference == 2
    assert counted == from_logs
    assert counted["retried"] == reference
    assert sum(counted["timeline"]) == reference
    assert counted["export"] == [len(log) for (log,) in logs]


@contextmanager
def json_array_length_calls() -> Iterator[Callable[[], int]]:
    """Count the calls of the database's JSON array length function on this
    connection, by a function of the same name that stands in for it: on
    SQLite an application-defined one (left in place, no longer counting: a
    built-in one cannot be put back), on PostgreSQL one in a schema searched
    before pg_catalog (rolled back with the test's transaction). Yields
    how many calls so far."""
    if connection.vendor == "sqlite":
        calls: list[str] = []
        # SQLite's own function, on a connection of its own: once shadowed, a
        # built-in function does not come back on this one (removing the
        # stand-in leaves a name that fails every call), and the connection
        # serves the worker's later tests.
        builtin = sqlite3.connect(":memory:", check_same_thread=False)

        def length(text: str | None) -> int | None:
            return builtin.execute("SELECT json_array_length(?)", [text]).fetchone()[0]

        def counting(text: str | None) -> int | None:
            calls.append(text or "")
            return length(text)

        connection.ensure_connection()
        raw = connection.connection
        raw.create_function("json_array_length", 1, counting, deterministic=True)
        try:
            yield lambda: len(calls)
        finally:
            raw.create_function("json_array_length", 1, length, deterministic=True)
        return
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA IF NOT EXISTS counting")
        cursor.execute("CREATE SEQUENCE IF NOT EXISTS counting.calls")
        cursor.execute("ALTER SEQUENCE counting.calls RESTART")
        cursor.execute(
            "CREATE OR REPLACE FUNCTION counting.jsonb_array_length(value jsonb)"
            " RETURNS int LANGUAGE sql VOLATILE AS $$"
            " SELECT pg_catalog.jsonb_array_length(value)"
            " + 0 * nextval('counting.calls')::int $$"
        )
        cursor.execute("SET LOCAL search_path = counting, pg_catalog, public")

        def counted() -> int:
            cursor.execute(
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END"
                " FROM counting.calls"
            )
            return cursor.fetchone()[0]

        try:
            yield counted
        finally:
            cursor.execute("SET LOCAL search_path = DEFAULT")


def test_a_counted_rows_log_is_never_parsed(dataset: Dataset) -> None:
    run = finished_run(dataset, [SLOW, RETRIED, *QUICK])

    with json_array_length_calls() as calls:
        counted = figures(run)
        assert calls() == 0

    Result.objects.filter(run=run).update(attempts_made=None)
    with json_array_length_calls() as calls:
        from_logs = figures(run)
        # Each of the three reads parses each of the six logs once.
        assert calls() == 3 * 6
    assert counted == from_logs


def test_counting_leaves_the_databases_function_working(dataset: Dataset) -> None:
    # The connection outlives the test: a later test of the same worker that
    # counts a row from its log must find the database's own function.
    run = finished_run(dataset, [SLOW, RETRIED, *QUICK])
    counted = figures(run)
    with json_array_length_calls():
        pass

    Result.objects.filter(run=run).update(attempts_made=None)

    assert figures(run) == counted


def test_adding_the_count_reads_no_stored_row(transactional_db: None) -> None:
    # A CHECK on the new column has ADD COLUMN test every stored result:
    # PostgreSQL scans the table under its exclusive lock, SQLite checks each
    # row against every CHECK of the table (each log's and output's
    # JSON_VALID too). Without one, the column is added without reading a row.
    # (Out of the test's transaction: SQLite's schema editor refuses one.)
    out = io.StringIO()
    call_command("sqlmigrate", "runs", "0037", stdout=out)

    assert '"attempts_made"' in out.getvalue()
    assert "CHECK" not in out.getvalue()

"""The executor's look-ups by key read only their keys, whatever PostgreSQL's
statistics say (PostgreSQL only, as the distributed mode).

A server may run without autovacuum, or analyze the results table long
before a run ends: its statistics then know nothing of the run under way,
the planner takes its rows for a few, and an open look-up of them reads them
all. These tests analyze the table before the run stores its rows, as such a
server would have, and count the rows each look-up reads (``EXPLAIN
ANALYZE``): a look-up must read about what it asks for, not the run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runs.executor import store
from runs.executor.store import ITEM_PAGE_SIZE, ResultRecord
from runs.models import Dataset, Item, Project, Result, Run
from runs.records import rows as records_rows
from runs.results.services import run_create
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS = 6000
# The earlier run's results, analyzed; the run's own, stored after.
STORED = 4000
BATCH = 500


def rows_read(sql: str, table: str) -> int:
    """Rows of ``table`` that ``sql`` reads: returned, or filtered out."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        (plan,) = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)

    def walk(node: dict[str, Any]) -> int:
        here = 0
        if node.get("Relation Name") == table:
            here = node["Actual Loops"] * (
                node["Actual Rows"]
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            )
        return here + sum(walk(child) for child in node.get("Plans", []))

    return walk(plan["Plan"])


def reads_of(queries: list[dict[str, str]], table: str) -> list[int]:
    return [
        rows_read(query["sql"], table)
        for query in queries
        if query["sql"].lstrip().upper().startswith("SELECT")
        and f'"{table}"' in query["sql"]
    ]


def store_rows(run: Run, items: range) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_result (run_id, item_id, item_index, epoch, status, "
            "output, error_kind, error_type, error_message, error_signature, "
            "error_pattern, attempts, started_at, finished_at, retry_pending, "
            "model, failed_attempts) SELECT %s, id, index, 0, 'succeeded', "
            "'\"5\"', '', '', '', '', '', '[]', now(), now(), false, '', 0 "
            "FROM runs_item WHERE dataset_id = %s AND index >= %s AND index < %s",
            [run.pk, run.dataset_id, items.start, items.stop],
        )


def analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_result")
        cursor.execute("ANALYZE runs_item")


@pytest.fixture
def dataset(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(ITEMS))


def new_run(dataset: Dataset) -> Run:
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="openai_chat",
        target_config={"base_url": "http://127.0.0.1:9/v1", "model": "fake"},
        scorers=["exact_match"],
        options={},
        launch=False,
    )


def superuser() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        return bool(cursor.fetchone()[0])


def test_a_batch_stored_reads_no_result_back(dataset: Dataset) -> None:
    earlier, run = new_run(dataset), new_run(dataset)
    store_rows(earlier, range(STORED))
    analyze()  # statistics from before the run: none of its rows
    store_rows(run, range(STORED))
    now = datetime.now(UTC)
    batch = [
        ResultRecord(
            item_id=item_id,
            item_index=index,
            epoch=0,
            status=Result.Status.SUCCEEDED,
            output="5",
            attempts=[{"number": 1, "outcome": "ok"}],
            started_at=now,
            finished_at=now,
        )
        for item_id, index in Item.objects.filter(
            dataset=dataset, index__gte=STORED, index__lt=STORED + BATCH
        ).values_list("pk", "index")
    ]
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        ids = records_rows.insert_results(run.pk, list(reversed(batch)))
    # The run holds STORED + BATCH results: its ids need none read.
    assert sum(reads_of(queries.captured_queries, "runs_result")) == 0
    by_id = dict(Result.objects.filter(run=run).values_list("pk", "item_index"))
    assert [by_id[pk] for pk in ids] == [r.item_index for r in reversed(batch)]


def test_the_results_of_a_page_of_items_are_read_for_that_page(
    dataset: Dataset,
) -> None:
    earlier, run = new_run(dataset), new_run(dataset)
    store_rows(earlier, range(ITEMS))
    analyze()  # statistics from before the run: none of its rows
    store_rows(run, range(STORED))
    with CaptureQueriesContext(connection) as queries:
        page = store.item_page(
            dataset.pk, after_index=999, stop_index=None, epochs=2, run_id=run.pk
        )
    assert [(item.index, epochs) for item, epochs in page] == [
        (index, [1]) for index in range(1000, 1000 + ITEM_PAGE_SIZE)
    ]
    reads = reads_of(queries.captured_queries, "runs_result")
    assert reads
    assert sum(reads) <= ITEM_PAGE_SIZE, reads


def test_a_page_of_items_without_statistics_reads_its_page(project: Project) -> None:
    if not superuser():
        pytest.skip("forgetting a table's statistics takes a superuser")
    dataset = make_dataset(project, arithmetic_items(ITEMS))
    run = new_run(dataset)
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM pg_statistic WHERE starelid = 'runs_item'::regclass"
        )
    with CaptureQueriesContext(connection) as queries:
        page = store.item_page(
            dataset.pk, after_index=999, stop_index=None, epochs=1, run_id=run.pk
        )
    assert [item.index for item, _ in page] == list(range(1000, 1000 + ITEM_PAGE_SIZE))
    reads = reads_of(queries.captured_queries, "runs_item")
    assert reads
    assert sum(reads) <= ITEM_PAGE_SIZE, reads

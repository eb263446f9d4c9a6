"""The rows of a run's results table: an ended run's filtered, counted and
paged in its stored result table, a running run's in SQL; the same rows,
counts and pages either way, and the queries each reads."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.analysis.clusters import run_clusters
from runs.analysis.figures import run_figures_store
from runs.models import Item, Result, Run, RunStatus
from runs.results.result_page import result_neighbours
from runs.results.rows import QueryRows, TableRows, result_rows
from runs.results.selectors import ResultFilters, result_filter, run_items_left
from tests.factories import arithmetic_items, make_dataset
from tests.varied_runs import UNSTORED, varied_run

API = "/api/v1"
pytestmark = pytest.mark.django_db

FILTERS = [
    {},
    {"status": "succeeded"},
    {"status": "failed"},
    {"status": "timed_out"},
    {"status": "cancelled"},
    {"status": "skipped"},
    {"status": "pending"},
    {"error_kind": "transient"},
    {"error_kind": "permanent"},
    {"error_kind": "timeout"},
    {"error_kind": "quota"},
    {"scorer": "second"},
    {"scorer": "exact_match", "verdict": "passed"},
    {"scorer": "exact_match", "verdict": "failed"},
    {"scorer": "exact_match", "verdict": "errored"},
    {"scorer": "exact_match", "verdict": "skipped"},
    {"scorer": "second", "verdict": "skipped"},
    {"scorer": "second", "verdict": "failed"},
    {"external_id": "q40"},
    {"external_id": "q12", "status": "skipped"},
    {"external_id": "nowhere"},
    {"status": "succeeded", "scorer": "second", "verdict": "passed"},
    {"status": "failed", "error_kind": "permanent"},
    {"status": "skipped", "error_kind": "transient"},
    {"error_kind": "timeout", "scorer": "exact_match", "verdict": "passed"},
]


@pytest.fixture
def dataset(project):
    return make_dataset(project, arithmetic_items(130), name="varied")


def _cluster_filters(run: Run) -> list[dict[str, str]]:
    found = run_clusters(run=_going(run))
    keys = [c.key for c in found.errors + found.failed_scores]
    assert len(keys) >= 5  # errors of three kinds, failing scores of two scorers
    return [{"cluster": key} for key in keys] + [
        {"cluster": keys[0], "status": "failed"},
        {"cluster": found.failed_scores[0].key, "scorer": "second"},
    ]


def _going(run: Run) -> Run:
    """The same run as a page sees it while it still goes: read in SQL."""
    copy = Run.objects.get(pk=run.pk)
    copy.status = RunStatus.RUNNING
    return copy


def _all(rows) -> list[tuple[int, int]]:
    """(item index, epoch) of every row, read one page of 7 at a time."""
    found = []
    for start in range(0, rows.count(), 7):
        found += [
            (row.index, 0) if isinstance(row, Item) else (row.item_index, row.epoch)
            for row in rows[start : start + 7]
        ]
    return found


def _sql(run: Run, params: dict[str, str]) -> list[tuple[int, int]]:
    filters = ResultFilters.parse(params, run=run)
    if filters.lists_items:
        return [
            (i, 0)
            for i in run_items_left(run=run, filters=filters).values_list(
                "index", flat=True
            )
        ]
    rows = result_filter(run=run, filters=filters)
    return list(rows.values_list("item_index", "epoch"))


def _table(run: Run, params: dict[str, str]):
    rows = result_rows(run=run, filters=ResultFilters.parse(params, run=run))
    return rows


@pytest.mark.parametrize("epochs", [1, 2])
def test_an_ended_run_lists_every_filters_rows_as_sql_does(dataset, epochs):
    run = varied_run(dataset, epochs=epochs)
    for params in FILTERS + _cluster_filters(run):
        rows = _table(run, params)
        expected = _sql(run, params)
        assert rows.count() == len(expected), params
        assert _all(rows) == expected, params


def test_the_filters_find_the_rows_they_name(dataset):
    run = varied_run(dataset)

    def indexes(**params):
        return [index for index, _ in _all(_table(run, params))]

    unstored = [i for i in range(130) if i % 13 == UNSTORED]
    assert indexes(status="skipped") == unstored
    assert indexes(error_kind="transient") == [
        i for i in range(130) if i % 11 == 3 and i not in unstored
    ]
    errored = indexes(scorer="exact_match", verdict="errored")
    assert errored and all(i % 5 == 2 for i in errored)
    assert indexes(scorer="second", verdict="skipped") == [
        i for i in indexes(status="succeeded") if i % 7 != 6 and i % 3 == 0
    ]
    assert indexes(external_id="q40") == [40]
    assert indexes(status="pending") == []  # the run has ended: skipped


def test_a_running_run_is_read_in_sql_with_the_same_rows(dataset):
    run = _going(varied_run(dataset))
    for params in FILTERS:
        rows = result_rows(run=run, filters=ResultFilters.parse(params, run=run))
        assert isinstance(rows, QueryRows), params
        assert _all(rows) == _sql(run, params), params


def test_every_slice_of_a_query_is_the_one_read_in_order(dataset):
    run = _going(varied_run(dataset))
    rows = QueryRows(result_filter(run=run, filters=ResultFilters()))
    every = _sql(run, {})
    count = rows.count()
    for start in range(0, count + 3, 5):
        for size in (1, 7, 50):
            page = rows[start : start + size]
            assert [(r.item_index, r.epoch) for r in page] == every[
                start : start + size
            ]


def test_pages_of_an_ended_run_hold_every_result_once_in_dataset_order(
    alice_client, dataset
):
    run = varied_run(dataset)
    for params in ({}, {"scorer": "exact_match", "verdict": "failed"}):
        expected = [index for index, _ in _sql(run, params)]
        seen, page = [], 1
        while True:
            body = alice_client.get(
                f"{API}/runs/{run.pk}/results",
                {**params, "page": page, "page_size": 9},
            ).json()
            assert body["count"] == len(expected)
            if not body["items"]:
                break
            seen += [row["index"] for row in body["items"]]
            page += 1
        assert seen == expected


def test_the_last_page_holds_the_last_rows(alice_client, dataset):
    run = varied_run(dataset)
    params = {"scorer": "second", "verdict": "failed"}
    expected = [index for index, _ in _sql(run, params)]
    last = -(-len(expected) // 10)
    body = alice_client.get(
        f"{API}/runs/{run.pk}/results", {**params, "page": last, "page_size": 10}
    ).json()
    assert [row["index"] for row in body["items"]] == expected[(last - 1) * 10 :]

    page = alice_client.get(f"/runs/{run.pk}/", {"page": 999}).content.decode()
    table = page.split('id="results"')[1]
    assert f"Page 3 of 3 · {run.processed} in all" in table
    last_ids = [
        f'data-result-id="{pk}"'
        for pk in result_filter(run=run, filters=ResultFilters()).values_list(
            "pk", flat=True
        )[100:]
    ]
    assert all(marker in table for marker in last_ids)


def test_the_page_lists_an_ended_runs_skipped_items(alice_client, dataset):
    run = varied_run(dataset)
    page = alice_client.get(f"/runs/{run.pk}/", {"status": "skipped"}).content
    table = page.decode().split('id="results"')[1]
    skipped = Item.objects.filter(dataset=dataset, index__in=range(12, 130, 13))
    assert 'id="items-left"' in table
    assert table.count("data-item-id=") == 10
    assert all(f'data-item-id="{item.pk}"' in table for item in skipped)


def test_skipped_items_of_a_dataset_with_a_gap_in_its_indexes(dataset):
    run = varied_run(dataset)
    Item.objects.filter(dataset=dataset, index=129).update(index=500)
    rows = _table(run, {"status": "skipped"})
    assert isinstance(rows, QueryRows)
    assert _all(rows) == _sql(run, {"status": "skipped"})


# -- what is read -----------------------------------------------------------------


def _captured(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return [query["sql"] for query in queries.captured_queries]


def test_an_ended_runs_verdict_filter_probes_no_score_and_counts_no_row(
    alice_client, dataset
):
    run = varied_run(dataset)
    run_figures_store(run.pk)  # as the executor does when a run ends
    url = f"{API}/runs/{run.pk}/results?scorer=exact_match&verdict=failed"
    url += "&page=2&page_size=5"
    queries = _captured(alice_client, url)
    assert not [sql for sql in queries if "EXISTS" in sql]
    assert not [sql for sql in queries if "COUNT(" in sql]
    # The page's results by id, and their scores by result.
    result_reads = [sql for sql in queries if 'FROM "runs_result"' in sql]
    assert len(result_reads) == 1
    assert '"runs_result"."id" IN (' in result_reads[0]


def test_the_last_page_of_an_ended_run_skips_no_row(alice_client, dataset):
    run = varied_run(dataset)
    run_figures_store(run.pk)
    queries = _captured(alice_client, f"{API}/runs/{run.pk}/results?page=3")
    assert not [sql for sql in queries if "OFFSET" in sql]


def test_the_last_page_of_a_running_run_is_read_from_the_end(alice_client, dataset):
    run = varied_run(dataset)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    expected = [index for index, _ in _sql(_going(run), {})]
    url = f"{API}/runs/{run.pk}/results?page=12&page_size=10"
    with CaptureQueriesContext(connection) as queries:
        body = alice_client.get(url).json()
    assert [row["index"] for row in body["items"]] == expected[110:]
    page = next(
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('SELECT "runs_result"."id"')
    )
    # From the end: the last rows first, none skipped on the way.
    assert '"runs_result"."item_index" DESC' in page
    assert "OFFSET" not in page


def test_skipped_items_of_an_ended_run_are_not_probed_one_by_one(alice_client, dataset):
    run = varied_run(dataset)
    run_figures_store(run.pk)
    queries = _captured(alice_client, f"{API}/runs/{run.pk}/results?status=skipped")
    assert not [sql for sql in queries if "EXISTS" in sql]


def test_an_ended_runs_results_are_read_from_its_table(dataset):
    run = varied_run(dataset)
    assert isinstance(_table(run, {"scorer": "second"}), TableRows)


def test_a_running_runs_error_kind_filter_reads_the_partial_index(dataset):
    if connection.vendor != "sqlite":
        pytest.skip("the plan of a tiny table says nothing on PostgreSQL")
    run = _going(varied_run(dataset))
    filters = ResultFilters.parse({"error_kind": "timeout"}, run=run)
    sql, params = result_filter(run=run, filters=filters).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    assert "result_run_error_kind_idx (run_id=? AND error_kind=?)" in plan


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


def test_a_page_of_an_ended_run_reads_its_rows_by_id(alice_client, dataset):
    if connection.vendor != "sqlite":
        pytest.skip("the plan of a tiny table says nothing on PostgreSQL")
    run = varied_run(dataset)
    run_figures_store(run.pk)
    queries = _captured(alice_client, f"{API}/runs/{run.pk}/results?page=2")
    page = next(sql for sql in queries if sql.startswith('SELECT "runs_result"."id"'))
    # Its rows by their ids, not found on a walk of the run's index.
    assert _plan(page) == "SEARCH runs_result USING INTEGER PRIMARY KEY (rowid=?)" + (
        " | SEARCH runs_item USING INTEGER PRIMARY KEY (rowid=?)"
    )


def test_a_results_neighbours_are_those_of_the_table_it_was_opened_from(dataset):
    run = varied_run(dataset)
    going = _going(run)
    results = list(run.results.order_by("item_index", "epoch"))
    for params in FILTERS[:5] + FILTERS[7:]:
        filters = ResultFilters.parse(params, run=run)
        if filters.lists_items:
            continue
        for result in results[::9] + results[-2:]:
            in_sql = Result.objects.get(pk=result.pk)
            in_sql.run = going
            assert result_neighbours(result=result, filters=filters) == (
                result_neighbours(result=in_sql, filters=filters)
            ), (params, result.item_index)


def test_a_results_page_finds_its_neighbours_without_probing_scores(
    alice_client, dataset
):
    run = varied_run(dataset)
    run_figures_store(run.pk)
    result = run.results.get(item_index=40)
    url = f"/runs/{run.pk}/results/{result.pk}/?scorer=second&verdict=failed"
    queries = _captured(alice_client, url)
    assert not [sql for sql in queries if "EXISTS" in sql]

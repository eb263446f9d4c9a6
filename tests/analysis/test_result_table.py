"""An ended run's result table: stored when it ends, read while current, and
the failure clusters counted in it as the database groups them."""

from __future__ import annotations

import dataclasses
import gc

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.analysis import result_table
from runs.analysis.cluster_moves import NOT_SCORED
from runs.analysis.clusters import run_clusters
from runs.analysis.figures import run_figures_store
from runs.models import Run, RunResultTable, RunStatus, Score, ScoringPass
from runs.records.versions import results_changed
from tests.factories import arithmetic_items, make_dataset
from tests.varied_runs import varied_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(project):
    return make_dataset(project, arithmetic_items(130), name="varied")


def _going(run: Run) -> Run:
    """The same run as it is read while it still goes: in SQL."""
    copy = Run.objects.get(pk=run.pk)
    copy.status = RunStatus.RUNNING
    return copy


def _result_reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "runs_result" in q["sql"]]


def test_the_table_is_stored_when_the_run_ends_and_read_while_current(dataset):
    run = varied_run(dataset)
    run_figures_store(run.pk)
    stored = RunResultTable.objects.get(run=run)
    assert stored.version == f"{result_table.FORMAT}:{run.results_version}"

    with CaptureQueriesContext(connection) as queries:
        table = result_table.run_result_table(run=run)
    assert table is not None
    assert len(table) == run.processed
    assert not _result_reads(queries)  # read back, not computed again


def test_a_table_of_an_older_version_is_computed_again(dataset):
    run = varied_run(dataset)
    run_figures_store(run.pk)
    results_changed(run)
    with CaptureQueriesContext(connection) as queries:
        table = result_table.run_result_table(run=run)
    assert table is not None and _result_reads(queries)
    stored = RunResultTable.objects.get(run=run)
    assert stored.version == f"{result_table.FORMAT}:{run.results_version}"


def test_a_run_being_rescored_or_still_going_has_no_table(dataset):
    run = varied_run(dataset)
    assert result_table.run_result_table(run=_going(run)) is None
    ScoringPass.objects.create(run=run, status=ScoringPass.Status.RUNNING)
    assert result_table.run_result_table(run=run) is None


def test_a_run_without_results_has_an_empty_table(dataset):
    run = varied_run(make_dataset(dataset.project, [], name="empty"))
    table = result_table.run_result_table(run=run)
    assert table is not None and len(table) == 0
    assert table.error_groups() == {} and table.reason_groups() == {}


def test_the_columns_hold_each_results_outcome(dataset):
    run = varied_run(dataset)
    table = result_table.run_result_table(run=run)
    assert table is not None
    rows = run.results.order_by("item_index", "epoch")
    assert table.ids.tolist() == list(rows.values_list("pk", flat=True))
    assert table.indexes.tolist() == list(rows.values_list("item_index", flat=True))
    statuses = table.vocabulary("status")
    assert [statuses[code] for code in table.array("status")] == list(
        rows.values_list("status", flat=True)
    )
    failed = table.marked("exact_match", result_table.FAILED)
    assert table.ids[failed].tolist() == list(
        rows.filter(
            scores__scorer="exact_match", scores__passed=False, scores__error=""
        ).values_list("pk", flat=True)
    )


def _clusters_as_data(found) -> dict:
    data = dataclasses.asdict(found)
    data.pop("run"), data.pop("baseline")
    return data


@pytest.mark.parametrize("epochs", [1, 2])
def test_clusters_counted_in_the_table_are_those_of_the_database(dataset, epochs):
    baseline = varied_run(dataset, epochs=epochs)
    run = varied_run(dataset, epochs=epochs, flip=True)
    for items in (0, 1, 5, 100):
        in_table = run_clusters(run=run, baseline=baseline, items_per_cluster=items)
        in_sql = run_clusters(
            run=_going(run), baseline=_going(baseline), items_per_cluster=items
        )
        assert _clusters_as_data(in_table) == _clusters_as_data(in_sql)
    found = run_clusters(run=run, baseline=baseline)
    assert found.errors and found.failed_scores
    assert any(cluster.moves for cluster in found.failed_scores)


def test_a_finished_runs_clusters_group_no_rows_in_the_database(dataset):
    run = varied_run(dataset)
    run_figures_store(run.pk)
    with CaptureQueriesContext(connection) as queries:
        found = run_clusters(run=run)
    assert found.errors and found.failed_scores
    assert not [q for q in queries.captured_queries if "GROUP BY" in q["sql"]]


def test_a_running_runs_error_clusters_read_only_its_errors(dataset):
    if connection.vendor != "sqlite":
        pytest.skip("the plan of a tiny table says nothing on PostgreSQL")
    run = _going(varied_run(dataset))
    with CaptureQueriesContext(connection) as queries:
        run_clusters(run=run)
    grouped = next(
        q["sql"]
        for q in queries.captured_queries
        if "GROUP BY" in q["sql"] and "runs_score" not in q["sql"]
    )
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {grouped}")
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    assert "error_signature>?" in plan


def test_moves_of_a_cluster_without_a_score_of_its_scorer(dataset):
    baseline = varied_run(dataset)
    run = varied_run(dataset, flip=True)
    # The run compared lost the second scorer's scores: its failing reasons
    # went nowhere ("not scored"), in the table as in SQL.
    Score.objects.filter(result__run=run, scorer="second").delete()
    results_changed(run)
    in_table = run_clusters(run=run, baseline=baseline)
    in_sql = run_clusters(run=_going(run), baseline=_going(baseline))
    assert _clusters_as_data(in_table) == _clusters_as_data(in_sql)
    moves = [m for c in in_table.failed_scores for m in c.moves]
    assert any(move.to == NOT_SCORED for move in moves)


def test_clusters_against_a_baseline_read_each_runs_table_once(dataset):
    baseline = varied_run(dataset)
    run = varied_run(dataset, flip=True)
    for each in (baseline, run):
        run_figures_store(each.pk)
    gc.collect()  # the instances that stored them, and their tables, are gone
    with CaptureQueriesContext(connection) as queries:
        found = run_clusters(run=run, baseline=baseline)
    assert sum(c.change in ("shrunk", "vanished") for c in found.failed_scores)
    tables = [q for q in queries.captured_queries if "runs_runresulttable" in q["sql"]]
    assert len(tables) == 2

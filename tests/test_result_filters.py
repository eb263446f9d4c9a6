"""Filtering a run's results: by status (pending too), error kind, verdict,
external id and cluster; on the page, in the API and in the selectors."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from runs.errors import InvalidInput
from runs.results.selectors import ResultFilters, result_filter, run_items_left
from runs.results.services import run_create
from tests.mixed_results import UNSTORED, cluster_key, mixed_run

API = "/api/v1"
pytestmark = pytest.mark.django_db


def indexes(run, **params) -> list[int]:
    filters = ResultFilters.parse(params, run=run)
    if filters.lists_items:
        items = run_items_left(run=run, filters=filters)
        return list(items.values_list("index", flat=True))
    results = result_filter(run=run, filters=filters)
    return list(results.values_list("item_index", flat=True))


def test_pending_lists_the_items_without_a_result_while_the_run_goes(dataset):
    run = mixed_run(dataset)
    assert indexes(run, status="pending") == list(UNSTORED)


def test_skipped_lists_the_items_without_a_result_once_the_run_ended(dataset):
    run = mixed_run(dataset, ended=True)
    assert indexes(run, status="skipped") == list(UNSTORED)
    assert indexes(run, status="pending") == []


def test_filter_by_status(dataset):
    run = mixed_run(dataset)
    assert indexes(run, status="failed") == [4, 5]
    assert indexes(run, status="timed_out") == [6]


def test_filter_by_error_kind(dataset):
    assert indexes(mixed_run(dataset), error_kind="timeout") == [6]


@pytest.mark.parametrize(
    ("verdict", "expected"), [("passed", [0, 1]), ("failed", [2]), ("errored", [3])]
)
def test_filter_by_a_scorers_verdict(dataset, verdict, expected):
    run = mixed_run(dataset)
    assert indexes(run, scorer="exact_match", verdict=verdict) == expected


def test_filter_by_external_id(dataset):
    run = mixed_run(dataset)
    assert indexes(run, external_id="q5") == [5]
    assert indexes(run, status="pending", external_id="q8") == [8]


def test_filter_by_cluster(dataset):
    assert indexes(mixed_run(dataset), cluster=cluster_key("sig-a")) == [4, 5]


def test_filters_combine(dataset):
    run = mixed_run(dataset)
    assert indexes(
        run, status="failed", cluster=cluster_key("sig-a"), external_id="q4"
    ) == [4]
    assert indexes(run, status="timed_out", cluster=cluster_key("sig-a")) == []
    assert indexes(run, status="pending", error_kind="transient") == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "meh"}, "status"),
        ({"error_kind": "meh"}, "error_kind"),
        ({"scorer": "nope"}, "scorer"),
        ({"verdict": "passed"}, "scorer"),
        ({"scorer": "exact_match", "verdict": "meh"}, "verdict"),
        ({"cluster": "x" * 201}, "cluster"),
        ({"cluster": "not-a-cluster"}, "cluster"),
        ({"cluster": "score::0123456789abcdef"}, "cluster"),
    ],
)
def test_a_bad_filter_names_its_parameter(dataset, params, field):
    with pytest.raises(InvalidInput) as caught:
        ResultFilters.parse(QueryDict(mutable=True) | params, run=mixed_run(dataset))
    assert caught.value.field == field


# -- the API ---------------------------------------------------------------------


def test_api_lists_pending_items_as_rows_without_a_result(alice_client, dataset):
    run = mixed_run(dataset)
    body = alice_client.get(f"{API}/runs/{run.pk}/results?status=pending").json()
    assert body["count"] == 3
    assert [(r["index"], r["id"], r["status"]) for r in body["items"]] == [
        (7, None, "pending"),
        (8, None, "pending"),
        (9, None, "pending"),
    ]


def test_api_filters_combine(alice_client, dataset):
    run = mixed_run(dataset)
    url = f"{API}/runs/{run.pk}/results?scorer=exact_match&verdict=passed"
    body = alice_client.get(url).json()
    assert [r["index"] for r in body["items"]] == [0, 1]


def test_api_unknown_scorer_is_400_naming_it(alice_client, dataset):
    run = mixed_run(dataset)
    response = alice_client.get(f"{API}/runs/{run.pk}/results?scorer=nope")
    assert response.status_code == 400
    assert response.json()["field"] == "scorer"


def test_api_unknown_verdict_is_a_validation_error(alice_client, dataset):
    run = mixed_run(dataset)
    url = f"{API}/runs/{run.pk}/results?scorer=exact_match&verdict=meh"
    response = alice_client.get(url)
    assert response.status_code == 422
    assert "verdict" in str(response.json()["detail"])


def test_api_filtered_results_of_an_outsiders_run_are_404(mallory_client, dataset):
    run = mixed_run(dataset)
    response = mallory_client.get(f"{API}/runs/{run.pk}/results?status=pending")
    assert response.status_code == 404


# -- the page --------------------------------------------------------------------


def test_page_lists_pending_items(alice_client, dataset):
    run = mixed_run(dataset)
    page = alice_client.get(f"/runs/{run.pk}/?status=pending").content.decode()
    assert 'id="items-left"' in page
    assert page.count("data-item-id=") == 3


def test_page_says_what_is_left(alice_client, dataset):
    run = mixed_run(dataset)
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "3 pending</a>, 0 in flight" in page


def test_page_filters_by_verdict(alice_client, dataset):
    run = mixed_run(dataset)
    url = f"/runs/{run.pk}/?scorer=exact_match&verdict=failed"
    page = alice_client.get(url).content.decode()
    table = page.split('id="results"')[1]  # not the live "latest results"
    assert table.count("data-result-id=") == 1


def test_page_with_a_bad_filter_is_400_naming_it(alice_client, dataset):
    run = mixed_run(dataset)
    response = alice_client.get(f"/runs/{run.pk}/?verdict=passed")
    assert response.status_code == 400
    assert "field &#x27;scorer&#x27;" in response.content.decode()


def test_page_filters_of_an_outsiders_run_are_404(mallory_client, dataset):
    run = mixed_run(dataset)
    assert mallory_client.get(f"/runs/{run.pk}/?status=pending").status_code == 404


def test_pending_with_epochs_lists_items_missing_any_epoch(project):
    from django.utils import timezone

    from runs.executor import store
    from runs.executor.store import ResultRecord
    from runs.models import Item
    from tests.factories import arithmetic_items, make_dataset

    dataset = make_dataset(project, arithmetic_items(2))
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="demo",
        target_config={},
        scorers=["exact_match"],
        options={"epochs": 2},
        launch=False,
    )
    first, second = Item.objects.filter(dataset=dataset).order_by("index")
    now = timezone.now()
    store.results_write(
        run.pk,
        [
            ResultRecord(first.pk, 0, epoch, "succeeded", "0", [], now, now)
            for epoch in (0, 1)
        ]
        + [ResultRecord(second.pk, 1, 0, "succeeded", "3", [], now, now)],
    )
    run.refresh_from_db()
    assert run.pending == 1
    assert indexes(run, status="pending") == [1]  # its epoch 1 has no result


def test_an_external_id_is_found_through_its_item_not_by_reading_the_run(dataset):
    from django.db import connection

    run = mixed_run(dataset)
    filters = ResultFilters.parse({"external_id": "q5"}, run=run)
    sql, params = result_filter(run=run, filters=filters).query.sql_with_params()
    if connection.vendor != "sqlite":
        pytest.skip("the plan of a tiny table says nothing on PostgreSQL")
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    # The item by its unique (dataset, external_id), then its results by the
    # unique (run, item, epoch): no walk over the run's results.
    assert "(dataset_id=? AND external_id=?)" in plan
    assert "(run_id=? AND item_id=?)" in plan


@pytest.mark.parametrize(
    ("query", "count"), [("status=cancelled", 0), ("status=failed&page=2", 2)]
)
def test_api_reads_no_rows_for_a_page_past_the_end(alice_client, dataset, query, count):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = mixed_run(dataset)
    with CaptureQueriesContext(connection) as queries:
        body = alice_client.get(f"{API}/runs/{run.pk}/results?{query}").json()

    assert body == {"items": [], "count": count}
    # Counted, and no page of rows read (it would walk the run to fill it).
    rows = [q for q in queries.captured_queries if 'FROM "runs_result"' in q["sql"]]
    assert [q["sql"].split(" FROM ")[0] for q in rows] == [
        'SELECT COUNT(*) AS "__count"'
    ]

"""GET /api/v1/runs/{id}/clusters?by=content, and the actions on its keys."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.models import Dataset, Project, Result, Run
from tests.content_runs import (
    CAKES,
    ODD,
    PASS,
    TIMEOUT,
    TRAINS,
    topic_dataset,
    topic_run,
)

API = "/api/v1"
pytestmark = pytest.mark.django_db


@pytest.fixture
def topics(project: Project) -> Dataset:
    return topic_dataset(project)


@pytest.fixture
def run(topics: Dataset) -> Run:
    return topic_run(topics, cakes=TIMEOUT)


def _content(client: Client, run: Run, **query: object) -> dict:
    response = client.get(f"{API}/runs/{run.pk}/clusters", {"by": "content", **query})
    assert response.status_code == 200, response.content
    return response.json()


def test_content_clusters_have_the_documented_shape(
    alice_client: Client, run: Run
) -> None:
    body = _content(alice_client, run, items=2)
    assert (body["by"], body["run"], body["baseline"]) == ("content", run.pk, None)
    assert (body["failing"], body["vectoriser"], body["note"]) == (
        TRAINS + CAKES + len(ODD),
        "tfidf",
        "",
    )
    trains, cakes = body["clusters"]
    assert (trains["count"], trains["retryable"]) == (TRAINS, 0)
    assert (cakes["count"], cakes["retryable"]) == (CAKES, CAKES)
    assert "train" in trains["terms"] and trains["key"].startswith("content:")
    assert [item["external_id"] for item in trains["items"]] == ["train0", "train1"]
    assert body["unclustered"]["count"] == len(ODD)


def test_by_signature_stays_the_default(alice_client: Client, run: Run) -> None:
    body = alice_client.get(f"{API}/runs/{run.pk}/clusters").json()
    assert body["by"] == "signature" and "errors" in body


def test_another_projects_run_is_404(mallory_client: Client, run: Run) -> None:
    response = mallory_client.get(f"{API}/runs/{run.pk}/clusters", {"by": "content"})
    assert response.status_code == 404


def test_an_unknown_grouping_is_refused(alice_client: Client, run: Run) -> None:
    response = alice_client.get(f"{API}/runs/{run.pk}/clusters", {"by": "colour"})
    assert response.status_code in (400, 422)


def test_against_a_baseline_clusters_say_how_they_moved(
    alice_client: Client, topics: Dataset, run: Run
) -> None:
    baseline = topic_run(topics, cakes=PASS)
    body = _content(alice_client, run, baseline=baseline.pk)
    assert body["baseline"] == baseline.pk
    assert sorted((c["change"], c["count"]) for c in body["clusters"]) == [
        ("new", CAKES),
        ("same", TRAINS),
    ]


def test_the_results_filter_takes_a_content_key(alice_client: Client, run: Run) -> None:
    cakes = _content(alice_client, run)["clusters"][1]
    body = alice_client.get(
        f"{API}/runs/{run.pk}/results", {"cluster": cakes["key"], "limit": 100}
    ).json()
    assert sorted(row["external_id"] for row in body["items"]) == sorted(
        f"cake{i}" for i in range(CAKES)
    )


def test_a_cluster_of_errors_may_be_retried(alice_client: Client, run: Run) -> None:
    cakes = _content(alice_client, run)["clusters"][1]
    response = alice_client.post(
        f"{API}/runs/{run.pk}/retry",
        {"cluster": cakes["key"], "dry_run": True},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["rewrites"] == CAKES


def test_a_cluster_of_answers_is_not_retried(alice_client: Client, run: Run) -> None:
    trains = _content(alice_client, run)["clusters"][0]
    response = alice_client.post(
        f"{API}/runs/{run.pk}/retry",
        {"cluster": trains["key"], "dry_run": True},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "cluster"


def test_a_stale_content_key_is_refused_naming_the_field(
    alice_client: Client, run: Run
) -> None:
    response = alice_client.post(
        f"{API}/runs/{run.pk}/retry",
        {"cluster": "content:0123456789ab", "dry_run": True},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "cluster"
    assert not Result.objects.filter(run=run, retry_pending=True).exists()

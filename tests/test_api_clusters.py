"""GET /api/v1/runs/{id}/clusters: a run's failure clusters, against a baseline."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.models import Dataset, Result, Run
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes

API = "/api/v1"
pytestmark = pytest.mark.django_db


def _run(dataset: Dataset, outcomes: list[dict]) -> Run:
    return store_outcomes(echo_run(dataset), outcomes)


def _quota(n: int) -> dict:
    message = f"HTTP 429: quota exceeded for org-{n:03d}x{n * 31:07d} ({n} requests)"
    return {"error": ("quota", "HTTP429", message)}


@pytest.fixture
def run(dataset: Dataset) -> Run:
    outcomes = [_quota(n) for n in range(4)]
    outcomes += [{"scores": [("exact_match", False, f"got '{n}'")]} for n in range(2)]
    outcomes += [{"scores": [("exact_match", True, "")]}] * 4
    return _run(dataset, outcomes)


def test_clusters_have_the_documented_shape(alice_client: Client, run: Run) -> None:
    body = alice_client.get(f"{API}/runs/{run.pk}/clusters").json()
    first = Result.objects.get(run=run, item_index=0)
    assert body["run"] == run.pk and body["baseline"] is None
    assert body["results"] == 10
    [error] = body["errors"]
    assert error["signature"] == error["key"] == first.error_signature
    assert error["kind"] == "quota"
    assert error["error_type"] == "HTTP429"
    assert error["example"] == first.error_message
    assert (error["count"], error["share"]) == (4, 0.4)
    assert (error["baseline_count"], error["change"]) == (None, None)
    assert [item["index"] for item in error["items"]] == [0, 1, 2, 3]
    assert error["items"][0] == {
        "result_id": first.pk,
        "index": 0,
        "epoch": 0,
        "external_id": "q0",
    }
    [score] = body["failed_scores"]
    assert score["scorer"] == "exact_match"
    assert score["key"] == f"score:exact_match:{score['signature']}"
    assert (score["count"], score["kind"]) == (2, "failed")


def test_against_a_baseline_clusters_say_how_they_moved(
    alice_client: Client, dataset: Dataset, run: Run
) -> None:
    baseline = _run(dataset, [_quota(n + 50) for n in range(6)])
    body = alice_client.get(
        f"{API}/runs/{run.pk}/clusters", {"baseline": baseline.pk}
    ).json()
    assert body["baseline"] == baseline.pk
    [error] = body["errors"]
    assert (error["count"], error["baseline_count"], error["change"]) == (
        4,
        6,
        "shrunk",
    )
    assert [s["change"] for s in body["failed_scores"]] == ["new"]


def test_items_bounds_the_items_listed(alice_client: Client, run: Run) -> None:
    body = alice_client.get(f"{API}/runs/{run.pk}/clusters", {"items": 1}).json()
    assert len(body["errors"][0]["items"]) == 1


def test_too_many_items_is_refused_naming_the_field(
    alice_client: Client, run: Run
) -> None:
    response = alice_client.get(f"{API}/runs/{run.pk}/clusters", {"items": 10_000})
    assert response.status_code == 422
    assert "items" in response.content.decode()


def test_a_viewer_may_read_the_clusters(victor_client: Client, run: Run) -> None:
    assert victor_client.get(f"{API}/runs/{run.pk}/clusters").status_code == 200


def test_an_outsider_gets_404(mallory_client: Client, run: Run) -> None:
    assert mallory_client.get(f"{API}/runs/{run.pk}/clusters").status_code == 404


def test_a_baseline_the_user_cannot_see_is_404(
    mallory_client: Client, other_project, run: Run
) -> None:
    theirs = _run(make_dataset(other_project, arithmetic_items(2)), [_quota(1)])
    response = mallory_client.get(
        f"{API}/runs/{theirs.pk}/clusters", {"baseline": run.pk}
    )
    assert response.status_code == 404


def test_anonymous_gets_401(client: Client, run: Run) -> None:
    assert client.get(f"{API}/runs/{run.pk}/clusters").status_code == 401

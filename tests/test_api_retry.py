"""POST /api/v1/runs/{id}/retry: the chosen results run again in the same run."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from runs.models import FINAL_RUN_STATUSES, Result, Run
from tests.mixed_results import cluster_key, ended_run_with_two_failures, mixed_run

API = "/api/v1"


def post_retry(client: Client, run: Run, **body: Any):
    return client.post(
        f"{API}/runs/{run.pk}/retry", body, content_type="application/json"
    )


def wait_until_final(client: Client, run: Run) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (body := client.get(f"{API}/runs/{run.pk}").json())[
        "status"
    ] not in FINAL_RUN_STATUSES:
        assert time.monotonic() < deadline, body["status"]
        time.sleep(0.05)
    return body


@pytest.mark.django_db(transaction=True)
def test_retry_reruns_the_failed_items_in_the_same_run(
    alice_client, project, fake_openai
):
    run = ended_run_with_two_failures(project, fake_openai)
    pks = set(Result.objects.filter(run=run).values_list("pk", flat=True))

    response = post_retry(alice_client, run, statuses=["failed", "timed_out"])

    assert response.status_code == 200
    body = response.json()
    assert (body["items"], body["results"], body["calls"]) == (2, 2, 2)
    assert body["launched"] is True
    assert body["run"]["id"] == run.pk
    assert body["run"]["counts"]["failed"] == 0  # taken out until rewritten
    final = wait_until_final(alice_client, run)
    assert final["status"] == "completed"
    assert final["counts"]["succeeded"] == final["counts"]["total"] == 5
    assert set(Result.objects.filter(run=run).values_list("pk", flat=True)) == pks


@pytest.mark.django_db
def test_dry_run_says_what_would_run_and_launches_nothing(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    body = post_retry(alice_client, run, statuses=["failed"], dry_run=True).json()
    # Two failed results, and the three items without one run too.
    assert (body["items"], body["rewrites"], body["missing"]) == (5, 2, 3)
    assert body["calls"] == 10  # five results, up to two attempts each
    assert body["launched"] is False
    assert body["statuses"] == ["failed", "skipped"]
    assert Run.objects.get(pk=run.pk).status == "cancelled"


@pytest.mark.django_db
def test_retry_of_one_cluster_counts_only_its_results(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    body = post_retry(
        alice_client,
        run,
        statuses=["timed_out"],
        cluster=cluster_key("sig-b"),
        dry_run=True,
    ).json()
    assert (body["rewrites"], body["cluster"]) == (1, cluster_key("sig-b"))


@pytest.mark.django_db
def test_retry_of_a_run_still_executing_is_409_saying_why(alice_client, dataset):
    run = mixed_run(dataset)  # still pending
    response = post_retry(alice_client, run, statuses=["failed"])
    assert response.status_code == 409
    assert "still pending" in response.json()["detail"]


@pytest.mark.django_db
def test_retry_of_an_unknown_status_is_400_naming_statuses(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    response = post_retry(alice_client, run, statuses=["pending"])
    assert response.status_code == 400
    assert response.json()["field"] == "statuses"


@pytest.mark.django_db
def test_a_viewer_cannot_retry(victor_client, dataset):
    run = mixed_run(dataset, ended=True)
    response = post_retry(victor_client, run, statuses=["failed"], dry_run=True)
    assert response.status_code == 403
    assert not Result.objects.filter(run=run, retry_pending=True).exists()


@pytest.mark.django_db
def test_an_outsider_gets_404(mallory_client, dataset):
    run = mixed_run(dataset, ended=True)
    response = post_retry(mallory_client, run, statuses=["failed"])
    assert response.status_code == 404


@pytest.mark.django_db
def test_a_cluster_without_statuses_retries_every_result_of_it(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    body = post_retry(
        alice_client, run, cluster=cluster_key("sig-a"), dry_run=True
    ).json()
    assert body["rewrites"] == 2
    assert body["statuses"][:4] == ["succeeded", "failed", "timed_out", "cancelled"]

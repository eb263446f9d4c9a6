"""What a retry changed is said wherever the run is: pages, API and export."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.analysis.cluster_keys import score_cluster_key
from runs.api import api
from runs.models import Dataset, Result, RetryPass, Run
from runs.records.signatures import score_signature
from tests.comparisons import paired_runs
from tests.mixed_results import cluster_key, mixed_run

pytestmark = pytest.mark.django_db
API = "/api/v1"
REDRAWN = "3 results re-drawn by retry"


def retried(run: Run) -> Run:
    """``run`` as if a retry pass had replaced three results, one an answer."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(retry_replaced=3, retry_replaced_answers=1)
    RetryPass.objects.create(
        run=run,
        status=RetryPass.Status.COMPLETED,
        statuses=["failed"],
        results=4,
        replaced=3,
        redrawn=1,
        kept=1,
        started_at=now,
        finished_at=now + timedelta(seconds=2.5),
    )
    run.refresh_from_db()
    return run


def failing_score_key() -> str:
    """The cluster key of MIXED's failing exact_match score (item 2)."""
    signature = score_signature(passed=False, reason="", error="")
    assert signature is not None
    return score_cluster_key("exact_match", signature.signature)


def text(response) -> str:
    return " ".join(response.content.decode().split())


def test_the_run_page_says_how_many_results_retries_redrew(alice_client, dataset):
    run = retried(mixed_run(dataset, ended=True))
    page = text(alice_client.get(reverse("runs:run_detail", args=[run.pk])))
    assert REDRAWN in page
    assert "1 of them had an answer" in page
    assert 'id="retry-pass-table"' in page
    assert '<td class="num">2.50</td>' in page  # the pass's own seconds


def test_the_runs_list_says_which_runs_retries_redrew(alice_client, dataset):
    run = retried(mixed_run(dataset, ended=True))
    page = text(alice_client.get(reverse("runs:run_list")))
    assert REDRAWN in page and f"#{run.pk}" in page


@pytest.mark.parametrize("side", [0, 1])
def test_the_compare_page_says_it_for_either_side(
    alice_client: Client, dataset: Dataset, side: int
):
    runs = paired_runs(
        dataset, both_passed=2, regressions=1, improvements=1, both_failed=1
    )
    retried(runs[side])
    query = {"baseline": runs[0].pk, "candidates": str(runs[1].pk)}
    page = text(alice_client.get(reverse("runs:compare"), query))
    assert REDRAWN in page


def test_the_clusters_page_offers_retry_only_for_errors(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    page = alice_client.get(reverse("runs:run_clusters", args=[run.pk]))
    html = page.content.decode()
    retry = reverse("runs:run_retry", args=[run.pk]) + "?cluster="
    assert f"{retry}{cluster_key('sig-a')}" in html
    assert failing_score_key() in html  # the cluster is shown
    assert f"{retry}{failing_score_key()}" not in html.replace("%3A", ":")


def test_the_retry_page_refuses_a_cluster_of_failing_scores_saying_why(
    alice_client, dataset
):
    run = mixed_run(dataset, ended=True)
    url = reverse("runs:run_retry", args=[run.pk])
    response = alice_client.get(url, {"cluster": failing_score_key()})
    assert response.status_code == 400
    assert "answered and scored" in text(response)
    assert not Result.objects.filter(run=run, retry_pending=True).exists()


def test_the_api_refuses_statuses_choosing_scored_answers_naming_the_field(
    alice_client, dataset
):
    run = mixed_run(dataset, ended=True)
    response = alice_client.post(
        f"{API}/runs/{run.pk}/retry",
        {"statuses": ["succeeded"]},
        content_type="application/json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "statuses"
    assert "answered and scored" in body["detail"]
    assert not Result.objects.filter(run=run, retry_pending=True).exists()


def test_the_run_api_gives_what_retries_replaced_and_each_pass(alice_client, dataset):
    run = retried(mixed_run(dataset, ended=True))
    body = alice_client.get(f"{API}/runs/{run.pk}").json()
    assert (body["retry_replaced"], body["retry_replaced_answers"]) == (3, 1)
    (retry,) = body["retry_passes"]
    assert (retry["replaced"], retry["redrawn"], retry["kept"]) == (3, 1, 1)
    assert retry["seconds"] == 2.5
    listed = alice_client.get(f"{API}/runs").json()["items"]
    assert [r["retry_replaced"] for r in listed if r["id"] == run.pk] == [3]


def test_the_schema_documents_the_retry_fields():
    schemas = api.get_openapi_schema()["components"]["schemas"]
    run = schemas["RunOut"]["properties"]
    assert "re-drawn by retry" in run["retry_replaced"]["description"]
    assert "answer" in run["retry_replaced_answers"]["description"]
    detail = schemas["RunDetailOut"]["properties"]
    assert "retry_passes" in detail


@pytest.mark.parametrize("format", ["csv", "jsonl"])
def test_the_export_carries_the_runs_retry_figures(alice_client, dataset, format):
    run = retried(mixed_run(dataset, ended=True))
    url = reverse("runs:run_export", args=[run.pk, format])
    body = b"".join(alice_client.get(url).streaming_content).decode()
    first, second = body.splitlines()[:2]
    if format == "csv":
        header, row = first.split(","), second.split(",")
        cell = row[header.index("run_retry_replaced")]
        answers = row[header.index("run_retry_replaced_answers")]
        assert (cell, answers) == ("3", "1")
    else:
        row = json.loads(first)
        assert (row["run_retry_replaced"], row["run_retry_replaced_answers"]) == (3, 1)

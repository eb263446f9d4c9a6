"""The retry page: confirm what a retry runs, then start it in the same run."""

from __future__ import annotations

import asyncio

import pytest
from django.urls import reverse

from runs.executor.engine import execute_run
from runs.models import Result, Run, RunStatus
from runs.retry.services import run_retry
from tests.executor.conftest import wait_for
from tests.factories import echo_run, store_outcomes
from tests.mixed_results import ended_run_with_two_failures, mixed_run


def retry_url(run: Run, query: str = "") -> str:
    return reverse("runs:run_retry", args=[run.pk]) + query


@pytest.mark.django_db
def test_confirmation_says_how_many_items_results_and_calls(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    page = alice_client.get(retry_url(run, "?status=failed&status=timed_out"))
    assert page.status_code == 200
    text = " ".join(page.content.decode().split())
    assert "This will retry <strong>6 items</strong> (6 results)" in text
    assert "up to <strong>12 calls</strong>" in text


@pytest.mark.django_db
def test_confirmation_changes_nothing(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    alice_client.get(retry_url(run, "?status=failed"))
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert not Result.objects.filter(run=run, retry_pending=True).exists()


@pytest.mark.django_db(transaction=True)
def test_post_starts_the_retry_and_shows_the_run(alice_client, project, fake_openai):
    run = ended_run_with_two_failures(project, fake_openai)
    response = alice_client.post(retry_url(run), {"status": ["failed"]})
    assert response.status_code == 302
    assert response.url == reverse("runs:run_detail", args=[run.pk])
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed")
    assert Result.objects.filter(run=run).count() == 5


@pytest.mark.django_db
def test_retry_of_a_run_still_executing_says_why(alice_client, dataset):
    run = mixed_run(dataset)
    response = alice_client.post(retry_url(run), {"status": ["failed"]})
    assert response.status_code == 409
    assert "still pending" in response.content.decode()


@pytest.mark.django_db
def test_run_page_offers_retry_to_editors(bob_client, dataset):
    run = mixed_run(dataset, ended=True)
    page = bob_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    assert 'id="run-retry-link"' in page
    assert 'id="run-resume-link"' in page  # the cancelled run has skipped items


@pytest.mark.django_db
def test_run_page_offers_no_retry_to_viewers(victor_client, dataset):
    run = mixed_run(dataset, ended=True)
    url = reverse("runs:run_detail", args=[run.pk])
    assert "run-retry-link" not in victor_client.get(url).content.decode()


@pytest.mark.django_db
def test_a_viewer_cannot_open_or_post_the_retry_page(victor_client, dataset):
    run = mixed_run(dataset, ended=True)
    assert victor_client.get(retry_url(run, "?status=failed")).status_code == 403
    assert victor_client.post(retry_url(run), {"status": "failed"}).status_code == 403
    assert not Result.objects.filter(run=run, retry_pending=True).exists()


@pytest.mark.django_db
def test_an_outsider_gets_404(mallory_client, dataset):
    run = mixed_run(dataset, ended=True)
    assert mallory_client.get(retry_url(run)).status_code == 404
    assert mallory_client.post(retry_url(run), {"status": "failed"}).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_result_page_shows_old_and_retried_attempts(alice_client, project, fake_openai):
    run = ended_run_with_two_failures(project, fake_openai)
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    asyncio.run(execute_run(run.pk))
    result = Result.objects.get(run=run, item_index=1)

    url = reverse("runs:result_detail", args=[run.pk, result.pk])
    page = alice_client.get(url).content.decode()

    assert page.count("retry 1 ·") == 1  # the new attempt, after the old one
    assert "flaky upstream" in page  # the old attempt's error stays readable


@pytest.mark.django_db
def test_resuming_a_run_with_nothing_left_says_why(alice_client, dataset):
    run = echo_run(dataset)
    outcome = {"scores": [("exact_match", True, "")]}
    run = store_outcomes(run, [outcome] * dataset.item_count)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)

    response = alice_client.post(reverse("runs:run_resume", args=[run.pk]), follow=True)

    assert response.status_code == 200
    assert "Not resumed: " in response.content.decode()
    assert "nothing to resume" in response.content.decode()

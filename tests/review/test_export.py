"""A queue's labelled items saved as a dataset that the scorer target runs."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from runs.executor.engine import execute_run
from runs.models import Dataset, Result, RunStatus
from runs.results.services import run_create
from runs.review.export import queue_dataset_create
from runs.review.services import queue_create
from tests.factories import arithmetic_items, make_dataset
from tests.review.builders import ended_run
from tests.review.test_labels import label_all

API = "/api/v1/review-queues"
VERDICTS = ["pass", "fail"] * 5


def _labelled_queue(bob, dataset, values=VERDICTS):
    queue = queue_create(user=bob, run=ended_run(dataset), name="q", raters=1)
    label_all(bob, queue, values)
    return queue


def test_the_api_saves_the_labelled_items_in_the_scorer_targets_layout(
    bob, bob_client, dataset
):
    queue = _labelled_queue(bob, dataset, VERDICTS[:6])
    response = bob_client.post(
        f"{API}/{queue.pk}/dataset", json.dumps({}), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    saved = Dataset.objects.get(pk=response.json()["id"])
    assert saved.name == "q labels" and saved.project_id == queue.project_id
    items = list(saved.items.order_by("index"))
    assert len(items) == 6  # four items are not labelled
    for item, review_item, verdict in zip(
        items, queue.items.order_by("position"), VERDICTS, strict=False
    ):
        assert item.input == review_item.result.output
        assert item.expected == verdict
        assert item.metadata["input"] == review_item.item.input
        assert item.metadata["expected"] == review_item.item.expected


def test_nothing_labelled_is_a_clear_error(bob, bob_client, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="q", raters=1)
    response = bob_client.post(
        f"{API}/{queue.pk}/dataset", json.dumps({}), content_type="application/json"
    )
    assert response.status_code == 400
    assert "consensus verdict" in response.content.decode()
    assert not Dataset.objects.filter(name="q labels").exists()


def test_saving_is_for_editors_of_the_project(
    bob, victor_client, mallory_client, dataset
):
    queue = _labelled_queue(bob, dataset)
    url = f"{API}/{queue.pk}/dataset"
    kind = "application/json"
    assert victor_client.post(url, "{}", content_type=kind).status_code == 403
    assert mallory_client.post(url, "{}", content_type=kind).status_code == 404
    page = f"/review/{queue.pk}/dataset/"
    assert victor_client.post(page).status_code == 403
    assert mallory_client.post(page).status_code == 404
    assert not Dataset.objects.filter(name="q labels").exists()


def test_the_page_button_saves_and_shows_the_dataset(bob, bob_client, dataset):
    queue = _labelled_queue(bob, dataset)
    assert (
        "Save as dataset"
        in bob_client.get(f"/review/{queue.pk}/agreement/").content.decode()
    )
    response = bob_client.post(f"/review/{queue.pk}/dataset/", {"name": "judge check"})
    assert response.status_code == 302
    saved = Dataset.objects.get(name="judge check")
    assert response["Location"].endswith(f"/datasets/{saved.pk}/")
    assert saved.item_count == 10


@pytest.mark.django_db(transaction=True)
async def test_the_saved_dataset_runs_through_the_scorer_target(
    project, bob, fake_openai
):
    def build():
        queue = _labelled_queue(bob, make_dataset(project, arithmetic_items(10)))
        saved = queue_dataset_create(user=bob, queue=queue)
        return run_create(
            user=bob,
            dataset=saved,
            target_kind="scorer",
            target_config={
                "scorer_kind": "llm_judge",
                "params": {"base_url": fake_openai.base_url, "model": "fake-judge"},
            },
            scorers=["exact_match"],
            options={"max_attempts": 1},
            launch=False,
        )

    run = await sync_to_async(build)()
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    results = [r async for r in Result.objects.filter(run=run).order_by("item_index")]
    assert len(results) == 10
    assert {r.output for r in results} <= {"pass", "fail"}
    assert fake_openai.stats.requests == 10

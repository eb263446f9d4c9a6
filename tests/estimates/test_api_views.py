"""The estimate in the API, on the new-run form and on the run page."""

from __future__ import annotations

import json

import pytest

from runs.models import Run, Target
from tests.comparisons import add_result, finish, make_run

API = "/api/v1/runs/estimate"


@pytest.fixture(autouse=True)
def prices(settings):
    settings.EVALSITE_PRICES = {"demo": (1.0, 2.0)}


@pytest.fixture
def target(project):
    return Target.objects.create(
        project=project, name="Demo", kind="demo", config={"min_latency_ms": 0}
    )


@pytest.fixture
def past(dataset, target) -> Run:
    """A finished run of the target: 10 items, 20 + 2 tokens each."""
    run = make_run(dataset)
    Run.objects.filter(pk=run.pk).update(target=target)
    for item in dataset.items.order_by("index"):
        result = add_result(run, item, {"exact_match": 1.0})
        result.prompt_tokens, result.completion_tokens, result.model = 20, 2, "demo"
        result.save()
    return finish(run)


def post(client, body):
    return client.post(API, json.dumps(body), content_type="application/json")


def body(dataset, target, **extra):
    return {
        "dataset": dataset.pk,
        "target": target.pk,
        "scorers": ["exact_match"],
    } | extra


def test_the_api_estimates_from_past_runs(victor_client, dataset, target, past):
    answer = post(victor_client, body(dataset, target, options={"epochs": 3}))
    assert answer.status_code == 200, answer.content
    found = answer.json()
    assert (found["basis"], found["runs"], found["results"]) == (
        "past_runs",
        [past.pk],
        30,
    )
    # 30 results of 20 prompt and 2 completion tokens, at $1 and $2 a million.
    assert found["cost"] == pytest.approx(30 * (20 * 1 + 2 * 2) / 1e6)
    assert found["target"]["prompt_tokens"] == 20


def test_the_api_says_when_there_is_no_basis(bob_client, dataset, target):
    found = post(bob_client, body(dataset, target)).json()
    assert (found["basis"], found["cost"]) == ("none", None)


def test_a_sample_needs_the_editor_role(victor_client, dataset, target):
    answer = post(victor_client, body(dataset, target, sample=2))
    assert answer.status_code == 403
    assert not Run.objects.exists()


def test_a_sample_larger_than_allowed_is_refused(bob_client, dataset, target):
    answer = post(bob_client, body(dataset, target, sample=21))
    assert answer.status_code == 422


def test_an_outsider_gets_no_estimate(mallory_client, dataset, target, past):
    assert post(mallory_client, body(dataset, target)).status_code == 404


def test_the_run_is_created_with_its_estimate(bob_client, dataset, target, past):
    answer = bob_client.post(
        "/api/v1/runs",
        json.dumps(body(dataset, target)),
        content_type="application/json",
    )
    assert answer.status_code == 201
    created = answer.json()
    assert created["estimated_cost"] == pytest.approx(10 * 24 / 1e6)
    assert created["estimate_basis"]["runs"] == [past.pk]


def test_the_form_shows_the_estimate_beside_the_budget(
    bob_client, dataset, target, past
):
    form = {
        "dataset": dataset.pk,
        "target": target.pk,
        "scorers": ["exact_match"],
        "concurrency": 1,
        "timeout_seconds": 10,
        "max_attempts": 1,
        "epochs": 1,
        "cost_budget": 0.0001,
    }
    page = bob_client.post("/runs/estimate/", form).content.decode()
    assert "About $0.00024" in page and "cost budget of $0.0001" in page
    assert "over the budget" in page


def test_the_run_page_shows_estimate_against_actual(bob_client, dataset, target, past):
    run = make_run(dataset)
    Run.objects.filter(pk=run.pk).update(
        estimated_cost=0.0002, estimate_basis={"runs": [past.pk]}, cost=0.0003
    )
    finish(run)
    page = bob_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Estimated" in page and "$0.0002" in page and "150% of that" in page


def test_the_form_offers_a_sample_and_says_it_is_charged(bob_client, dataset, target):
    form = {
        "dataset": dataset.pk,
        "target": target.pk,
        "scorers": ["exact_match"],
        "concurrency": 1,
        "timeout_seconds": 10,
        "max_attempts": 1,
        "epochs": 1,
    }
    page = bob_client.post("/runs/estimate/", form).content.decode()
    assert "No estimate yet" in page and "(charged)" in page
    page = bob_client.post("/runs/estimate/", form | {"sample": 3}).content.decode()
    (sample,) = Run.objects.all()
    assert (sample.name, sample.total) == ("Cost sample: 3 items", 3)
    assert "sent to the target for real and charged" in page

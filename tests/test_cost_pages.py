"""Cost on the run and result pages, in the API, the resume form and endpoint,
and the admin's price table."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.executor.engine import execute_run
from runs.models import ModelPrice, Project, Result, Run, RunStatus
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import arithmetic_items, make_dataset

API = "/api/v1"
live_db = pytest.mark.django_db(transaction=True)
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


@pytest.fixture(autouse=True)
def fake_price(settings):
    settings.EVALSITE_PRICES = {"fake": (1000.0, 3000.0)}


def executed(
    project: Project,
    server: FakeOpenAIServer,
    *,
    model: str = "fake",
    count: int = 4,
    marker: str = "",
    **options: Any,
) -> Run:
    run = run_create(
        user=None,
        dataset=make_dataset(project, arithmetic_items(count, marker=marker)),
        target_kind="openai_chat",
        target_config={"base_url": server.base_url, "model": model},
        scorers=["exact_match"],
        options={**FAST, **options},
        launch=False,
    )
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    return run


def wait_until_final(run: Run) -> Run:
    """A launched run, once its executor (in the background) has ended it."""
    deadline = time.monotonic() + 30
    while not (run := Run.objects.get(pk=run.pk)).is_final:
        assert time.monotonic() < deadline, run.status
        time.sleep(0.05)
    return run


def text_of(response) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


# -- pages -----------------------------------------------------------------------


@live_db
def test_run_page_shows_the_cost_and_its_budget(alice_client, project, fake_openai):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02)
    text = text_of(alice_client.get(f"/runs/{run.pk}/"))
    assert "Cost $0.024 of a $0.02 budget" in text
    assert "cost budget of $0.02 reached" in text


@live_db
def test_run_page_says_which_model_has_no_price(alice_client, project, fake_openai):
    run = executed(project, fake_openai, model="mystery-model")
    text = text_of(alice_client.get(f"/runs/{run.pk}/"))
    assert "no price for model mystery-model" in text
    assert "$0.00" not in text  # never a made-up zero


@live_db
def test_result_page_shows_cost_per_attempt_and_result(
    alice_client, project, fake_openai
):
    run = executed(project, fake_openai, count=1, marker="[[flaky:1]]")
    result = Result.objects.get(run=run)
    text = text_of(alice_client.get(f"/runs/{run.pk}/results/{result.pk}/"))
    # The 500 reported nothing; the answer 5 + 1 tokens at $1000/$3000 per M.
    assert "Cost $0.008 model fake" in text
    dash = "\u2013"
    assert f"1 {dash} {dash} {dash} {dash} 2 fake 5 1 $0.008" in text


@live_db
def test_result_page_says_no_price(alice_client, project, fake_openai):
    run = executed(project, fake_openai, count=1, model="mystery-model")
    result = Result.objects.get(run=run)
    text = text_of(alice_client.get(f"/runs/{run.pk}/results/{result.pk}/"))
    assert "Cost no price for model mystery-model" in text


@live_db
def test_the_resume_form_runs_the_skipped_items(
    bob_client, project, fake_openai, settings
):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02)
    page = bob_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'name="cost_budget"' in page and "Run the 1 skipped item" in page

    too_low = bob_client.post(f"/runs/{run.pk}/resume/", {"cost_budget": "0.01"})
    assert too_low.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    shown = text_of(bob_client.get(f"/runs/{run.pk}/"))
    assert "Not resumed: the run has already cost $0.024" in shown

    bob_client.post(f"/runs/{run.pk}/resume/", {"cost_budget": "1"})
    run = wait_until_final(run)
    assert run.options["cost_budget"] == 1.0
    assert (run.status, run.processed, run.total) == (RunStatus.COMPLETED, 4, 4)
    assert "Resumed: the skipped items run now." in text_of(
        bob_client.get(f"/runs/{run.pk}/")
    )


@live_db
def test_resuming_a_run_with_nothing_skipped_says_why(bob_client, project, fake_openai):
    run = executed(project, fake_openai, concurrency=1)
    response = bob_client.post(f"/runs/{run.pk}/resume/", {"cost_budget": "1"})
    assert response.status_code == 302
    shown = text_of(bob_client.get(f"/runs/{run.pk}/"))
    assert f"Not resumed: run {run.pk} has a result for every item" in shown


@live_db
def test_a_viewer_sees_no_resume_form_and_cannot_resume(
    victor_client, project, fake_openai
):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02)
    assert (
        'name="cost_budget"'
        not in victor_client.get(f"/runs/{run.pk}/").content.decode()
    )
    assert (
        victor_client.post(f"/runs/{run.pk}/resume/", {"cost_budget": "1"}).status_code
        == 403
    )


@live_db
def test_an_outsider_cannot_resume(mallory_client, project, fake_openai):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02)
    response = mallory_client.post(f"/runs/{run.pk}/resume/", {"cost_budget": "1"})
    assert response.status_code == 404


# -- API -------------------------------------------------------------------------


@live_db
def test_api_gives_cost_per_run_result_and_attempt(alice_client, project, fake_openai):
    run = executed(project, fake_openai, count=2)
    body = alice_client.get(f"{API}/runs/{run.pk}").json()
    assert body["cost"] == pytest.approx(0.016) and body["unpriced"] == 0
    results = alice_client.get(f"{API}/runs/{run.pk}/results").json()["items"]
    assert [r["cost"] for r in results] == [pytest.approx(0.008)] * 2
    assert [r["model"] for r in results] == ["fake", "fake"]
    assert results[0]["attempts"][0]["cost"] == pytest.approx(0.008)
    summary = alice_client.get(f"{API}/runs/{run.pk}/summary").json()
    assert summary["cost"] == pytest.approx(0.016)
    assert summary["unpriced_models"] == []


@live_db
def test_api_null_cost_and_unpriced_models(alice_client, project, fake_openai):
    run = executed(project, fake_openai, count=2, model="mystery-model")
    body = alice_client.get(f"{API}/runs/{run.pk}").json()
    assert body["unpriced"] == 2
    results = alice_client.get(f"{API}/runs/{run.pk}/results").json()["items"]
    assert [r["cost"] for r in results] == [None, None]
    summary = alice_client.get(f"{API}/runs/{run.pk}/summary").json()
    assert summary["cost"] is None
    assert summary["unpriced_models"] == ["mystery-model"]


@live_db
def test_api_creates_a_run_with_a_budget(alice_client, project):
    dataset = make_dataset(project, arithmetic_items(2))
    response = alice_client.post(
        f"{API}/runs",
        {
            "dataset": dataset.pk,
            "target_kind": "demo",
            "scorers": ["exact_match"],
            "options": {"cost_budget": -1},
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "options.cost_budget"


@live_db
def test_api_resume_with_a_higher_budget(alice_client, project, fake_openai):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02, count=6)
    response = alice_client.post(
        f"{API}/runs/{run.pk}/resume",
        {"options": {"cost_budget": 2}},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["launched"] is True
    assert body["run"]["options"]["cost_budget"] == 2
    assert body["run"]["status"] in ("pending", "running", "completed")
    run = wait_until_final(run)
    assert (run.status, run.processed) == (RunStatus.COMPLETED, 6)
    assert run.cost == pytest.approx(6 * 0.008)


@live_db
@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"options": {"cost_budget": 0.01}}, 400),
        ({"options": {"epochs": 3}}, 400),
        ({"options": {"cost_budget": "lots"}}, 400),
        ([1, 2], 422),
    ],
)
def test_api_resume_refuses_bad_input(alice_client, project, fake_openai, body, status):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02)
    response = alice_client.post(
        f"{API}/runs/{run.pk}/resume", body, content_type="application/json"
    )
    assert response.status_code == status, response.content
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


@live_db
def test_api_resume_of_a_complete_run_is_a_conflict(alice_client, project, fake_openai):
    run = executed(project, fake_openai, count=2)
    response = alice_client.post(
        f"{API}/runs/{run.pk}/resume", {}, content_type="application/json"
    )
    assert response.status_code == 409


@live_db
def test_api_resume_is_refused_to_a_viewer_and_an_outsider(
    victor_client, mallory_client, project, fake_openai
):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02)
    for client, status in ((victor_client, 403), (mallory_client, 404)):
        response = client.post(
            f"{API}/runs/{run.pk}/resume",
            {"options": {"cost_budget": 5}},
            content_type="application/json",
        )
        assert response.status_code == status


# -- admin -----------------------------------------------------------------------


@pytest.fixture
def admin_client(db) -> Client:
    User.objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(User.objects.get(username="root"))
    return client


@pytest.mark.django_db
def test_admin_adds_a_price_that_the_table_then_uses(admin_client):
    from runs.calls.pricing import price_table

    response = admin_client.post(
        "/admin/runs/modelprice/add/",
        {
            "model": "gpt-4o-mini*",
            "prompt_per_million": "0.15",
            "completion_per_million": "0.60",
            "note": "list price",
        },
    )
    assert response.status_code == 302
    assert price_table().cost("gpt-4o-mini-2024-07-18", 1_000_000, 0) == 0.15
    listing = admin_client.get("/admin/runs/modelprice/", {"q": "mini"})
    assert "gpt-4o-mini*" in listing.content.decode()


@pytest.mark.django_db
def test_admin_refuses_a_star_inside_a_name(admin_client):
    response = admin_client.post(
        "/admin/runs/modelprice/add/",
        {"model": "gpt*mini", "prompt_per_million": "1", "completion_per_million": "1"},
    )
    assert response.status_code == 200
    assert "a * may only end it" in response.content.decode()
    assert not ModelPrice.objects.exists()


@live_db
def test_api_lists_the_items_a_budget_skipped(alice_client, project, fake_openai):
    run = executed(project, fake_openai, concurrency=1, cost_budget=0.02, count=5)
    body = alice_client.get(
        f"{API}/runs/{run.pk}/results", {"status": "skipped"}
    ).json()
    assert body["count"] == 2
    assert [(r["status"], r["cost"], r["model"]) for r in body["items"]] == [
        ("skipped", None, ""),
        ("skipped", None, ""),
    ]

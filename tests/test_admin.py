from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Dataset, Run, RunStatus, Target
from runs.projects.services import api_key_create
from runs.results.services import run_create
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(project) -> Client:
    User.objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(User.objects.get(username="root"))
    return client


@pytest.fixture
def run(project) -> Run:
    dataset = make_dataset(project, arithmetic_items(3))
    Target.objects.create(project=project, name="demo", kind="demo", config={})
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="demo",
        scorers=["exact_match"],
        launch=False,
    )


@pytest.mark.parametrize(
    "model",
    [
        "project",
        "membership",
        "dataset",
        "item",
        "target",
        "run",
        "result",
        "score",
        "apikey",
        "step",
    ],
)
def test_every_model_has_a_searchable_changelist(admin_client, run, model):
    response = admin_client.get(f"/admin/runs/{model}/", {"q": "x"})
    assert response.status_code == 200


def test_run_change_page_shows_frozen_fields_read_only(admin_client, run):
    response = admin_client.get(f"/admin/runs/run/{run.pk}/change/")
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert "target_config" not in form.fields and "status" not in form.fields


def test_dataset_content_cannot_be_edited(admin_client, run):
    dataset = Dataset.objects.get()
    response = admin_client.post(
        f"/admin/runs/dataset/{dataset.pk}/change/", {"content_hash": "forged"}
    )
    dataset.refresh_from_db()
    assert response.status_code in (200, 302)
    assert dataset.content_hash != "forged"


def test_cancel_action_cancels_the_selected_runs(admin_client, run):
    response = admin_client.post(
        "/admin/runs/run/",
        {"action": "cancel_runs", "_selected_action": [run.pk]},
        follow=True,
    )
    run.refresh_from_db()
    assert response.status_code == 200
    assert (run.cancel_requested, run.status) == (True, RunStatus.CANCELLED)
    assert "Asked 1 run(s) to cancel." in response.content.decode()


def test_api_keys_cannot_be_added_in_admin(admin_client):
    assert admin_client.get("/admin/runs/apikey/add/").status_code == 403


def test_api_key_pages_never_show_the_key_hash(admin_client, alice):
    key, _ = api_key_create(user=alice, name="ci")

    listing = admin_client.get("/admin/runs/apikey/").content.decode()
    change = admin_client.get(f"/admin/runs/apikey/{key.pk}/change/").content.decode()

    assert key.prefix in listing and key.prefix in change
    assert key.key_hash not in listing and key.key_hash not in change


def test_admin_index_names_passes_in_plain_english(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert "Scoring passes" in page
    assert "passs" not in page

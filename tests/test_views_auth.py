"""Login, logout and the login wall in front of every page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import Dataset, Project, Result, Run
from runs.results.services import run_create
from tests.conftest import PASSWORD


@pytest.fixture
def run(dataset: Dataset) -> Run:
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        launch=False,
    )


def _page_urls(run: Run, dataset: Dataset) -> list[str]:
    return [
        reverse("runs:run_list"),
        reverse("runs:run_new"),
        reverse("runs:run_detail", args=[run.pk]),
        reverse("runs:result_detail", args=[run.pk, 1]),
        reverse("runs:dataset_list"),
        reverse("runs:dataset_detail", args=[dataset.pk]),
        reverse("runs:dataset_upload"),
        reverse("runs:target_list"),
    ]


def test_login_page_renders_for_anonymous(client: Client, db: None) -> None:
    response = client.get(reverse("login"))

    assert response.status_code == 200
    assert b'name="username"' in response.content
    assert b"csrfmiddlewaretoken" in response.content


def test_login_with_password_leads_to_the_runs_list(
    client: Client, alice: User
) -> None:
    response = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    assert response.status_code == 302
    assert response.url == reverse("runs:run_list")


def test_login_with_a_wrong_password_shows_an_error(
    client: Client, alice: User
) -> None:
    response = client.post(reverse("login"), {"username": "alice", "password": "no"})

    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


def test_every_page_sends_anonymous_visitors_to_login(
    client: Client, run: Run, dataset: Dataset
) -> None:
    for url in _page_urls(run, dataset):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login") + "?next="), url


def test_every_post_sends_anonymous_visitors_to_login(
    client: Client, run: Run, dataset: Dataset
) -> None:
    for url in [
        reverse("runs:run_new"),
        reverse("runs:run_cancel", args=[run.pk]),
        reverse("runs:dataset_upload"),
        reverse("runs:target_list"),
    ]:
        response = client.post(url, {})
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login")), url
    assert Run.objects.get(pk=run.pk).cancel_requested is False


def test_logout_is_a_post_form_in_the_nav(
    alice_client: Client, project: Project
) -> None:
    page = alice_client.get(reverse("runs:run_list")).content.decode()

    assert f'action="{reverse("logout")}"' in page
    response = alice_client.post(reverse("logout"))
    assert response.status_code == 302
    assert alice_client.get(reverse("runs:run_list")).status_code == 302


def test_pages_carry_the_csrf_token_for_htmx(
    alice_client: Client, project: Project
) -> None:
    page = alice_client.get(reverse("runs:run_list")).content.decode()

    assert 'hx-headers=\'{"X-CSRFToken": "' in page


def test_csrf_is_enforced_on_posts(alice: User, run: Run) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post(reverse("runs:run_cancel", args=[run.pk]))

    assert response.status_code == 403
    assert Run.objects.get(pk=run.pk).cancel_requested is False
    assert not Result.objects.exists()

"""Error pages: 403, 404 and 500 in the site's layout, and how refusals are logged."""

from __future__ import annotations

import logging

import pytest
from django.test import Client, RequestFactory, override_settings
from django.urls import reverse
from django.views.defaults import server_error

from runs.models import Project, Target


@pytest.fixture
def stored_target(project: Project) -> Target:
    return Target.objects.create(project=project, name="demo", kind="demo", config={})


@override_settings(DEBUG=False)
def test_a_missing_page_is_shown_in_the_site_layout(alice_client: Client) -> None:
    response = alice_client.get("/runs/999999/")

    assert response.status_code == 404
    page = response.content.decode()
    assert "Not found" in page
    assert 'class="topbar"' in page  # the site's layout, with its navigation
    assert "Traceback" not in page and "999999" not in page


@override_settings(DEBUG=False)
def test_a_refused_page_is_shown_in_the_site_layout(
    victor_client: Client, stored_target: Target
) -> None:
    url = reverse("runs:target_detail", args=[stored_target.pk])

    response = victor_client.post(url, {"name": "renamed"})

    assert response.status_code == 403
    page = response.content.decode()
    assert "Not allowed" in page and 'class="topbar"' in page
    assert "editor role" in page  # why, as the access policy says it


@override_settings(DEBUG=False)
@pytest.mark.django_db
def test_a_server_error_is_shown_in_the_site_layout() -> None:
    response = server_error(RequestFactory().get("/runs/"))

    assert response.status_code == 500
    page = response.content.decode()
    assert "Server error" in page and 'class="topbar"' in page


def test_a_refused_page_is_logged_at_info_without_traceback(
    victor_client: Client, stored_target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = reverse("runs:target_detail", args=[stored_target.pk])

    response = victor_client.post(url, {"name": "renamed"})

    assert response.status_code == 403
    refusals = [r for r in caplog.records if "Forbidden" in r.getMessage()]
    assert len(refusals) == 1
    assert refusals[0].levelno == logging.INFO and not refusals[0].exc_info


def test_a_refused_api_call_is_logged_at_info(
    victor_client: Client, stored_target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    response = victor_client.delete(
        f"/api/v1/targets/{stored_target.pk}", HTTP_X_CSRFTOKEN="x"
    )

    assert response.status_code == 403
    refusals = [r for r in caplog.records if "Forbidden" in r.getMessage()]
    assert len(refusals) == 1
    assert refusals[0].levelno == logging.INFO and not refusals[0].exc_info

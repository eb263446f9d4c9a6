"""The OpenAPI schema and its docs page, for a session or an API key."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.projects.services import api_key_create

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def key_client(alice: User) -> Client:
    _, plain = api_key_create(user=alice, name="ci")
    return Client(HTTP_AUTHORIZATION=f"Bearer {plain}")


def test_schema_is_reachable_with_an_api_key(key_client: Client) -> None:
    response = key_client.get(f"{API}/openapi.json")

    assert response.status_code == 200
    assert "/api/v1/runs" in response.json()["paths"]


def test_docs_page_is_reachable_with_an_api_key(key_client: Client) -> None:
    response = key_client.get(f"{API}/docs")

    assert response.status_code == 200
    assert b"swagger-ui" in response.content


def test_anonymous_schema_request_gets_401_json(client: Client) -> None:
    response = client.get(f"{API}/openapi.json")

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_anonymous_json_client_asking_for_the_docs_gets_401(client: Client) -> None:
    response = client.get(f"{API}/docs", HTTP_ACCEPT="application/json")

    assert response.status_code == 401


def test_wrong_key_gets_401_for_the_schema(client: Client) -> None:
    response = client.get(
        f"{API}/openapi.json", HTTP_AUTHORIZATION="Bearer evk_00000000_nope"
    )

    assert response.status_code == 401


def test_docs_page_loads_swagger_from_this_site_only(alice_client: Client) -> None:
    html = alice_client.get(f"{API}/docs").content.decode()

    # Every script, style and link is on this site (a bare "cdn" search can
    # match inside the page's random CSRF token).
    addresses = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert addresses
    assert [a for a in addresses if a.startswith(("http:", "https:", "//"))] == []
    assert "<script>" not in html  # nothing inline that the CSP would block
    for asset in ("swagger-ui-bundle.js", "swagger-ui-init.js", "swagger-ui.css"):
        path = f"/static/ninja/{asset}"
        assert path in html
        assert alice_client.get(path).status_code == 200

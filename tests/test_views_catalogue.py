"""The catalogue: every target kind and scorer, on a page and in the API."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from runs.scorers import REGISTRY as SCORERS
from runs.targets import REGISTRY as TARGETS

API = "/api/v1"


def test_catalogue_needs_a_login(client: Client) -> None:
    response = client.get(reverse("runs:catalogue"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_catalogue_endpoints_need_authentication(client: Client) -> None:
    assert client.get(f"{API}/scorers").status_code == 401
    assert client.get(f"{API}/targets/kinds").status_code == 401


def test_catalogue_lists_every_kind_with_its_parameters(victor_client: Client) -> None:
    response = victor_client.get(reverse("runs:catalogue"))

    assert response.status_code == 200
    page = response.content.decode()
    for kind in [*TARGETS, *SCORERS]:
        assert f'<code class="muted">{kind}</code>' in page
    assert "<code>abs_tol</code>" in page
    assert "0 to 2" in page  # temperature's bounds
    assert "Needs no expected answer." in page
    assert "<code>api_key_secret</code>" in page  # a secret, by name


def test_catalogue_is_linked_from_the_nav(victor_client: Client) -> None:
    page = victor_client.get(reverse("runs:run_list")).content.decode()

    assert f'href="{reverse("runs:catalogue")}"' in page


def test_scorers_endpoint_describes_each_scorer(victor_client: Client) -> None:
    response = victor_client.get(f"{API}/scorers")

    assert response.status_code == 200
    body = {entry["kind"]: entry for entry in response.json()}
    assert set(body) == set(SCORERS)
    numeric = body["numeric"]
    assert set(numeric) == {
        "kind",
        "label",
        "description",
        "parameters",
        "example",
        "secrets",
        "needs_expected",
        "needs_steps",
    }
    assert numeric["needs_expected"] is True
    assert numeric["needs_steps"] is False
    assert numeric["parameters"]["properties"]["extract"]["enum"] == [
        "last",
        "first",
        "only",
    ]
    assert numeric["parameters"]["additionalProperties"] is False


def test_target_kinds_endpoint_names_secrets_never_values(
    mallory_client: Client,
) -> None:
    response = mallory_client.get(f"{API}/targets/kinds")

    assert response.status_code == 200
    body = {entry["kind"]: entry for entry in response.json()}
    assert set(body) == set(TARGETS)
    assert body["openai_chat"]["secrets"] == ["api_key_secret", "api_key_env"]
    required = body["openai_chat"]["parameters"]["required"]
    assert required == ["base_url", "model"]
    assert "needs_expected" not in body["demo"]


NEW_SCORERS = ("choice", "f1", "similarity", "json", "math", "python")


def test_the_new_scorers_are_in_the_api_and_on_the_page(victor_client: Client) -> None:
    body = {
        entry["kind"]: entry for entry in victor_client.get(f"{API}/scorers").json()
    }
    page = victor_client.get(reverse("runs:catalogue")).content.decode()

    for kind in NEW_SCORERS:
        assert body[kind]["example"] == SCORERS[kind].example
        assert body[kind]["description"] == SCORERS[kind].summary()
        assert f'<code class="muted">{kind}</code>' in page
    assert {kind for kind in NEW_SCORERS if not body[kind]["needs_expected"]} == {
        "json",
        "python",
    }
    assert body["json"]["parameters"]["properties"]["schema"]["anyOf"][0] == {
        "additionalProperties": True,
        "type": "object",
    }
    assert "<code>options_field</code>" in page

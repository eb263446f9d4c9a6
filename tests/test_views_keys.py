"""The API keys page: each user creates, names and revokes their own keys."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.errors import InvalidInput
from runs.models import ApiKey, Dataset
from runs.projects.services import api_key_create

pytestmark = pytest.mark.django_db

KEYS = "/account/keys/"


def _revoke_url(key: ApiKey) -> str:
    return reverse("runs:account_key_revoke", args=[key.pk])


def test_keys_page_is_at_account_keys(alice_client: Client) -> None:
    assert reverse("runs:account_keys") == KEYS
    assert alice_client.get(KEYS).status_code == 200


def test_keys_page_needs_a_login(client: Client) -> None:
    response = client.get(KEYS)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_new_key_is_shown_once_and_works(
    alice_client: Client, alice: User, dataset: Dataset
) -> None:
    response = alice_client.post(KEYS, {"name": "laptop"})

    plain = response.context["plain_key"]
    key = ApiKey.objects.get(user=alice)
    assert response.status_code == 200
    assert plain in response.content.decode()
    assert key.name == "laptop" and plain.startswith(f"evk_{key.prefix}_")
    assert "no-store" in response["Cache-Control"]
    api = Client().get("/api/v1/datasets", HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert api.status_code == 200

    again = alice_client.get(KEYS).content.decode()
    assert plain not in again
    assert key.prefix in again and "laptop" in again
    assert key.key_hash not in again


def test_new_key_needs_a_name(alice_client: Client, alice: User) -> None:
    response = alice_client.post(KEYS, {"name": ""})

    assert response.context["form"].errors["name"]
    assert response.context["plain_key"] is None
    assert not ApiKey.objects.exists()


def test_keys_page_lists_only_the_users_own_keys(
    alice_client: Client, alice: User, mallory: User
) -> None:
    api_key_create(user=alice, name="mine")
    api_key_create(user=mallory, name="hers")

    page = alice_client.get(KEYS).content.decode()

    assert "mine" in page and "hers" not in page


def test_revoked_key_stops_working_at_once(
    alice_client: Client, alice: User, dataset: Dataset
) -> None:
    key, plain = api_key_create(user=alice, name="ci")
    api = Client()
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {plain}"}
    assert api.get("/api/v1/datasets", **bearer).status_code == 200

    response = alice_client.post(_revoke_url(key))

    key.refresh_from_db()
    assert response.status_code == 302
    assert key.revoked_at is not None
    assert api.get("/api/v1/datasets", **bearer).status_code == 401
    assert "revoked" in alice_client.get(KEYS).content.decode()


def test_revoking_another_users_key_is_not_found(
    mallory_client: Client, alice: User
) -> None:
    key, _ = api_key_create(user=alice, name="ci")

    response = mallory_client.post(_revoke_url(key))

    key.refresh_from_db()
    assert response.status_code == 404
    assert key.revoked_at is None


def test_revoke_refuses_get(alice_client: Client, alice: User) -> None:
    key, _ = api_key_create(user=alice, name="ci")

    assert alice_client.get(_revoke_url(key)).status_code == 405
    key.refresh_from_db()
    assert key.revoked_at is None


def test_a_key_name_too_long_is_refused_naming_the_field(alice: User) -> None:
    with pytest.raises(InvalidInput) as caught:
        api_key_create(user=alice, name="k" * 101)

    assert caught.value.field == "name"
    assert not ApiKey.objects.exists()

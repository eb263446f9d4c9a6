"""A bearer request never waits on the database to note that its key was used."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from runs.models import ApiKey
from runs.projects.key_usage import RECORD_INTERVAL, key_usage_flush
from runs.projects.services import api_key_create

pytestmark = pytest.mark.django_db(transaction=True)


def bearer(plain: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite's database-wide write lock"
)
def test_bearer_read_answers_while_another_writer_holds_the_lock(
    client: Client, alice: User
) -> None:
    key, plain = api_key_create(user=alice, name="ci")
    blocker = sqlite3.connect(connection.settings_dict["NAME"], timeout=1)
    blocker.execute("BEGIN IMMEDIATE")  # what a long import holds
    try:
        response = client.get("/api/v1/runs", **bearer(plain))
    finally:
        blocker.rollback()
        blocker.close()

    assert response.status_code == 200
    key_usage_flush()
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_key_use_is_recorded_once_per_interval(client: Client, alice: User) -> None:
    key, plain = api_key_create(user=alice, name="ci")
    client.get("/api/v1/runs", **bearer(plain))
    key_usage_flush()
    key.refresh_from_db()
    first = key.last_used_at

    client.get("/api/v1/runs", **bearer(plain))
    key_usage_flush()
    key.refresh_from_db()

    assert first is not None
    assert key.last_used_at == first


def test_key_use_is_recorded_again_after_the_interval(
    client: Client, alice: User
) -> None:
    key, plain = api_key_create(user=alice, name="ci")
    earlier = timezone.now() - RECORD_INTERVAL - timedelta(seconds=1)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=earlier)

    client.get("/api/v1/runs", **bearer(plain))
    key_usage_flush()
    key.refresh_from_db()

    assert key.last_used_at > earlier

"""Log-in attempts are throttled per username and client address (django-axes)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.test import AsyncClient, Client
from django.urls import reverse

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

WRONG = "not-the-password"


def _fail_until_locked(client: Client, url: str, username: str) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = client.post(url, {"username": username, "password": WRONG})
        assert response.status_code in (200, 429)


def test_the_attempt_after_the_limit_is_refused_even_with_the_right_password(
    client: Client, alice: User
) -> None:
    _fail_until_locked(client, reverse("login"), "alice")

    response = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("runs:run_list")).status_code == 302  # to log in


def test_the_lockout_is_explained_on_the_login_page(
    client: Client, alice: User
) -> None:
    _fail_until_locked(client, reverse("login"), "alice")

    response = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    page = response.content.decode()
    assert "Too many failed log-in attempts" in page
    assert f"{settings.AXES_COOLOFF_TIME.seconds // 60} minutes" in page
    assert 'name="password"' in page  # still the log-in page


def test_failures_below_the_limit_do_not_lock_out(client: Client, alice: User) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post(reverse("login"), {"username": "alice", "password": WRONG})

    response = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    assert response.status_code == 302
    assert response.url == reverse("runs:run_list")


def test_a_lockout_is_per_username(client: Client, alice: User, bob: User) -> None:
    _fail_until_locked(client, reverse("login"), "alice")

    response = client.post(reverse("login"), {"username": "bob", "password": PASSWORD})

    assert response.status_code == 302


def test_a_lockout_is_per_client_address(alice: User) -> None:
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    _fail_until_locked(attacker, reverse("login"), "alice")

    response = Client(REMOTE_ADDR="198.51.100.7").post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    assert response.status_code == 302


def test_a_lockout_ends_after_the_cool_off(client: Client, alice: User) -> None:
    _fail_until_locked(client, reverse("login"), "alice")
    # The clock is the boundary: age the recorded failures past the cool-off.
    attempt = AccessAttempt.objects.get(username="alice")
    attempt.attempt_time -= settings.AXES_COOLOFF_TIME
    attempt.save(update_fields=["attempt_time"])

    response = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    assert response.status_code == 302


def test_the_admin_login_is_throttled_too(client: Client, db: None) -> None:
    User.objects.create_superuser("root", "root@example.org", PASSWORD)
    url = reverse("admin:login")
    _fail_until_locked(client, url, "root")

    response = client.post(url, {"username": "root", "password": PASSWORD})

    assert response.status_code == 429
    assert "Too many failed log-in attempts" in response.content.decode()
    assert client.get(reverse("admin:index")).status_code == 302


def test_a_successful_login_clears_earlier_failures(
    client: Client, alice: User
) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post(reverse("login"), {"username": "alice", "password": WRONG})
    client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    client.post(reverse("logout"))

    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post(reverse("login"), {"username": "alice", "password": WRONG})
    response = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    assert response.status_code == 302


@pytest.mark.django_db(transaction=True)
async def test_the_lockout_page_is_served_through_the_asgi_handler(
    alice: User,
) -> None:
    client = AsyncClient()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        await client.post(reverse("login"), {"username": "alice", "password": WRONG})

    response = await client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}
    )

    assert response.status_code == 429
    assert "Too many failed log-in attempts" in response.content.decode()
    assert await sync_to_async(AccessAttempt.objects.count)() == 1

"""Sessions cached in Redis: what another writer plants there is never loaded.

These run in the PostgreSQL pass, where ``REDIS_URL`` puts the sessions cache
in Redis; without it the cache is the test process's own memory.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.backends.cached_db import SessionStore
from django.core.cache import caches
from django.test import Client
from django.urls import reverse

from tests.conftest import PASSWORD
from tests.test_signed_cache import Planted


@pytest.fixture
def redis_server() -> Iterator[redis.Redis]:
    """The Redis server itself, as anything that reaches it sees it."""
    if "redis" not in settings.CACHES["sessions"]["BACKEND"].lower():
        pytest.skip("the sessions cache is in Redis only with REDIS_URL")
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


def entry_name(session_key: str) -> str:
    """The name the sessions cache keeps ``session_key`` under in Redis."""
    return caches["sessions"].make_key(SessionStore(session_key).cache_key)


def logged_in(user: User) -> Client:
    client = Client()
    response = client.post(
        reverse("login"), {"username": user.username, "password": PASSWORD}
    )
    assert response.status_code == 302
    return client


def test_a_pickle_planted_under_a_session_runs_nothing(
    redis_server: redis.Redis, bob: User, tmp_path: Path
) -> None:
    client = logged_in(bob)
    session_key = client.cookies[settings.SESSION_COOKIE_NAME].value
    marker = tmp_path / "ran"
    redis_server.set(entry_name(session_key), pickle.dumps(Planted(marker)))

    response = client.get(reverse("runs:run_list"))

    assert not marker.exists()
    # Read from the database instead: still bob's session, cached afresh.
    assert response.status_code == 200
    assert response.wsgi_request.user == bob
    cached = caches["sessions"].get(SessionStore(session_key).cache_key)
    assert cached["_auth_user_id"] == str(bob.pk)


def test_a_pickle_planted_for_an_unknown_session_leaves_it_signed_out(
    redis_server: redis.Redis, db: None, tmp_path: Path
) -> None:
    client = Client()
    session_key = "p" * 32
    client.cookies[settings.SESSION_COOKIE_NAME] = session_key
    marker = tmp_path / "ran"
    redis_server.set(entry_name(session_key), pickle.dumps(Planted(marker)))

    response = client.get(reverse("runs:run_list"))

    assert not marker.exists()
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_a_signed_in_session_lasts_across_requests_as_signed_json(
    redis_server: redis.Redis, bob: User
) -> None:
    client = logged_in(bob)
    session_key = client.cookies[settings.SESSION_COOKIE_NAME].value

    pages = [client.get(reverse("runs:run_list")) for _ in range(3)]

    assert [page.status_code for page in pages] == [200, 200, 200]
    assert all(page.wsgi_request.user == bob for page in pages)
    stored = redis_server.get(entry_name(session_key))
    assert stored is not None and not stored.startswith(b"\x80")  # no pickle
    assert not any(session_key.encode() in name for name in redis_server.keys("*"))


def test_requests_share_one_pool_of_connections_to_redis(
    redis_server: redis.Redis,
) -> None:
    # Each request has a cache object of its own (``caches`` is local to the
    # request's context; a thread has one of its own too). Each made a pool
    # of its own: one more connection to Redis, and its hello, per request;
    # and a redis-py client for each call.
    def connection() -> tuple[int, int]:
        cache = caches["sessions"]
        cache.get("anything")
        client = cache._cache.get_client()
        return int(client.client_id()), id(client)

    seen: list[tuple[int, int]] = []
    for _ in range(5):  # one request after another, each in its own thread
        thread = threading.Thread(target=lambda: seen.append(connection()))
        thread.start()
        thread.join()

    assert len(seen) == 5
    connections, clients = ({one[i] for one in seen} for i in (0, 1))
    assert len(connections) == 1, f"{len(connections)} connections for 5 requests"
    assert len(clients) == 1, f"{len(clients)} clients for 5 requests"

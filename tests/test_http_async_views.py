"""A coroutine view waits on the event loop, not on one of the server's worker
threads (evalsite/handlers.py): while tries wait on a slow target, pages
still answer, with a single worker thread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from django.urls import reverse

from evalsite.handlers import SyncChainASGIHandler, serves_async_view
from runs.models import Project, Target
from runs.testing.fake_openai import FakeOpenAIServer

# How long a page may take while the tries wait: far beyond a page's time,
# and short of the try's own timeout, which would free the thread anyway.
PAGE_WAIT = 4.0


@pytest.fixture
def one_thread() -> Iterator[SyncChainASGIHandler]:
    app = SyncChainASGIHandler(threads=1)
    yield app
    app.executor.submit(connections.close_all).result()
    app.executor.shutdown()


def _try_request(
    surface: str, user: User, target: Target
) -> tuple[str, list[tuple[bytes, bytes]], bytes]:
    """The path, headers and body of a try that never gets its answer."""
    client = Client()
    client.force_login(user)
    csrf = _get_new_csrf_string()
    cookies = f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}"
    headers = [(b"cookie", cookies.encode()), (b"x-csrftoken", csrf.encode())]
    if surface == "api":
        headers.append((b"content-type", b"application/json"))
        body = json.dumps({"input": "[[hang]]"}).encode()
        return f"/api/v1/targets/{target.pk}/try", headers, body
    headers += [
        (b"hx-request", b"true"),
        (b"content-type", b"application/x-www-form-urlencoded"),
    ]
    path = reverse("runs:target_try", args=[target.pk])
    return path, headers, b"input=%5B%5Bhang%5D%5D"


async def _wait_for_in_flight(fake: FakeOpenAIServer, count: int) -> None:
    for _ in range(500):
        if fake.stats.in_flight == count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"gave up waiting for {count} tries to reach the endpoint")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("surface", ["page", "api"])
async def test_pages_answer_while_tries_wait_on_a_slow_target(
    surface: str,
    project: Project,
    bob: User,
    fake_openai: FakeOpenAIServer,
    one_thread: SyncChainASGIHandler,
    settings: Any,
) -> None:
    target = await Target.objects.acreate(
        project=project,
        name="slow",
        kind="openai_chat",
        config={"base_url": fake_openai.base_url, "model": "m", "api_key_env": ""},
    )
    path, headers, body = await sync_to_async(_try_request)(surface, bob, target)
    host = [(b"host", b"testserver")]
    tries = [
        HttpCommunicator(one_thread, "POST", path, body=body, headers=host + headers)
        for _ in range(settings.EVALSITE_TRIES_AT_ONCE)
    ]
    pending = [asyncio.ensure_future(c.get_response(timeout=30)) for c in tries]
    try:
        await _wait_for_in_flight(fake_openai, len(tries))

        login = HttpCommunicator(one_thread, "GET", reverse("login"), headers=host)
        try:
            page = await login.get_response(timeout=PAGE_WAIT)
        except TimeoutError:
            pytest.fail(
                f"the log-in page did not answer within {PAGE_WAIT} s while "
                "the tries waited: they hold the worker thread"
            )
    finally:
        for communicator, waiting in zip(tries, pending, strict=True):
            waiting.cancel()
            communicator.future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    assert page["status"] == 200


def test_only_the_try_views_leave_the_worker_threads() -> None:
    def scope(path: str) -> dict[str, Any]:
        return {"type": "http", "path": path, "root_path": ""}

    assert serves_async_view(scope(reverse("runs:target_try", args=[1])))
    assert serves_async_view(scope("/api/v1/targets/1/try"))
    assert not serves_async_view(scope(reverse("login")))
    assert not serves_async_view(scope("/api/v1/targets/1"))
    assert not serves_async_view(scope("/no/such/page/"))

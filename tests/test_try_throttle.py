""" "Send one request" to a target: each user has a few tries at a time and a
few a minute, on the page and in the API alike (runs/targets/try_throttle.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import AsyncClient
from django.urls import reverse

from runs.models import Project, Target
from runs.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db(transaction=True)

SURFACES = ["page", "api"]


async def _target(project: Project, fake: FakeOpenAIServer) -> Target:
    return await Target.objects.acreate(
        project=project,
        name="local",
        kind="openai_chat",
        config={"base_url": fake.base_url, "model": "m", "api_key_env": ""},
    )


async def _client(user: User) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def _try(
    client: AsyncClient, surface: str, target: Target, text: str
) -> HttpResponse:
    if surface == "api":
        return await client.post(
            f"/api/v1/targets/{target.pk}/try",
            {"input": text},
            content_type="application/json",
        )
    url = reverse("runs:target_try", args=[target.pk])
    return await client.post(url, {"input": text}, headers={"HX-Request": "true"})


async def _wait_for(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"gave up waiting for {what}")


def _message(surface: str, response: HttpResponse) -> str:
    if surface == "api":
        return response.json()["detail"]
    return response.content.decode()


@pytest.mark.parametrize("surface", SURFACES)
async def test_a_try_beyond_the_users_concurrency_is_refused_with_429(
    surface: str,
    project: Project,
    bob: User,
    fake_openai: FakeOpenAIServer,
    settings: Any,
) -> None:
    target = await _target(project, fake_openai)
    client = await _client(bob)
    allowed = settings.EVALSITE_TRIES_AT_ONCE
    waiting = [
        asyncio.create_task(_try(client, surface, target, "[[hang]]"))
        for _ in range(allowed)
    ]
    try:
        await _wait_for(
            lambda: fake_openai.stats.in_flight == allowed,
            f"{allowed} tries to wait on the endpoint",
        )

        response = await _try(client, surface, target, "What is 1 + 1?")
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert f"you have {allowed} tries waiting for an answer" in _message(
        surface, response
    )
    assert fake_openai.stats.requests == allowed


@pytest.mark.parametrize("surface", SURFACES)
async def test_a_finished_try_frees_its_place(
    surface: str,
    project: Project,
    bob: User,
    fake_openai: FakeOpenAIServer,
    settings: Any,
) -> None:
    settings.EVALSITE_TRIES_AT_ONCE = 1
    target = await _target(project, fake_openai)
    client = await _client(bob)

    first = await _try(client, surface, target, "What is 1 + 1?")
    second = await _try(client, surface, target, "What is 2 + 2?")

    assert (first.status_code, second.status_code) == (200, 200)
    assert fake_openai.stats.requests == 2


@pytest.mark.parametrize("surface", SURFACES)
async def test_tries_beyond_the_rate_are_refused_until_the_minute_ends(
    surface: str,
    project: Project,
    bob: User,
    fake_openai: FakeOpenAIServer,
    settings: Any,
) -> None:
    settings.EVALSITE_TRY_PER_MINUTE = 3
    target = await _target(project, fake_openai)
    client = await _client(bob)

    answered = [
        (await _try(client, surface, target, "What is 1 + 1?")).status_code
        for _ in range(3)
    ]
    refused = await _try(client, surface, target, "What is 1 + 1?")

    assert answered == [200, 200, 200]
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "at most 3 tries a minute" in _message(surface, refused)
    assert fake_openai.stats.requests == 3


async def test_one_users_limit_leaves_another_users_tries_alone(
    project: Project,
    alice: User,
    bob: User,
    fake_openai: FakeOpenAIServer,
    settings: Any,
) -> None:
    settings.EVALSITE_TRY_PER_MINUTE = 1
    target = await _target(project, fake_openai)
    bob_client, alice_client = await _client(bob), await _client(alice)

    await _try(bob_client, "api", target, "What is 1 + 1?")
    refused = await _try(bob_client, "api", target, "What is 1 + 1?")
    answered = await _try(alice_client, "api", target, "What is 1 + 1?")

    assert (refused.status_code, answered.status_code) == (429, 200)

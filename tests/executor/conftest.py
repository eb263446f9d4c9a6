from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from runs.executor.shared_limits import LocalStore, PostgresStore, RedisStore
from runs.models import Dataset, Project, Run
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import make_dataset

FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}
REDIS_URL = os.environ.get("REDIS_URL", "")


@pytest.fixture
def make_run(project: Project, fake_openai: FakeOpenAIServer) -> Callable[..., Run]:
    """A run of ``items`` against the local server, created but not launched."""

    def build(
        items: list[dict[str, Any]],
        *,
        scorers: list[Any] | None = None,
        dataset: Dataset | None = None,
        **options: Any,
    ) -> Run:
        dataset = dataset or make_dataset(project, items)
        return run_create(
            user=None,
            dataset=dataset,
            target_kind="openai_chat",
            target_config={"base_url": fake_openai.base_url, "model": "fake"},
            scorers=scorers or ["exact_match"],
            options={**FAST, **options},
            launch=False,
        )

    return build


def wait_for(predicate: Callable[[], bool], *, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


async def wait_until(
    condition: Callable[[], bool], what: str, *, seconds: float = 30.0
) -> None:
    """Wait, on the loop, until ``condition`` holds, saying ``what`` if never."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {seconds:g} s: {what}")
        await asyncio.sleep(0.02)


@pytest.fixture(params=["process", "redis", "postgresql"])
def make_store(request: pytest.FixtureRequest) -> Iterator[Callable[[], object]]:
    """A factory of clients of one store (Redis: a connection each, as two
    processes would have)."""
    made: list[RedisStore] = []
    if request.param == "process":
        local = LocalStore()
        yield lambda: local
    elif request.param == "redis":
        if not REDIS_URL:
            pytest.skip("needs Redis (REDIS_URL): run in the PostgreSQL pass")

        def redis_store() -> RedisStore:
            made.append(RedisStore(REDIS_URL))
            return made[-1]

        yield redis_store
    else:
        if connection.vendor != "postgresql":
            pytest.skip("needs PostgreSQL (DATABASE_URL): run in the PostgreSQL pass")
        yield PostgresStore
    for client in made:
        asyncio.run(client.aclose())

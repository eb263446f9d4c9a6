from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from runs.models import Dataset, Project, Run
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import make_dataset

FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


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

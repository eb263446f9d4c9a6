from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from runs.models import Project, Run
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.agents.tool_server import SEEN, Seen, ToolHandler
from tests.factories import make_dataset
from tests.local_http import serve

FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}
NUMBERS = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
QUERY = {"type": "object", "properties": {"query": {"type": "string"}}}


@pytest.fixture
def agent_model() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer(agent=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def tool_url() -> Iterator[str]:
    SEEN.reset()
    with serve(ToolHandler) as base:
        yield base
    SEEN.release.set()


@pytest.fixture
def seen() -> Seen:
    return SEEN


def three_tools(tool_url: str, *, path: str = "/echo", **http: Any) -> list[dict]:
    return [
        {
            "kind": "python",
            "name": "add",
            "params": {"callable": "runs.tools.examples.add", "parameters": NUMBERS},
        },
        {
            "kind": "python",
            "name": "lookup",
            "params": {"callable": "runs.tools.examples.lookup", "parameters": QUERY},
        },
        {
            "kind": "http",
            "name": "search",
            "params": {"url": tool_url + path, "body": {"q": "{query}"}, **http},
        },
    ]


def agent_config(
    model: FakeOpenAIServer, tools: list[dict], **params: Any
) -> dict[str, Any]:
    return {"base_url": model.base_url, "model": "fake", "tools": tools, **params}


@pytest.fixture
def make_agent_run(project: Project) -> Callable[..., Run]:
    """A run of ``items`` against an agent, created but not launched."""
    numbers = itertools.count()

    def build(
        items: list[dict[str, Any]],
        config: dict[str, Any],
        *,
        scorers: list[Any] | None = None,
        **options: Any,
    ) -> Run:
        for row in items:
            row.setdefault("expected", "")
        return run_create(
            user=None,
            dataset=make_dataset(project, items, name=f"agent-{next(numbers)}"),
            target_kind="agent",
            target_config=config,
            scorers=scorers if scorers is not None else ["exact_match"],
            options={**FAST, **options},
            launch=False,
        )

    return build

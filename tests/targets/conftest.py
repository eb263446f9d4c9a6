"""The calls' client is tested on both event loops it runs on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from runs.pools import loops

# Whose code calls models on either loop: the server's is asyncio's (Daphne),
# evalsite's own (evalrun, the workers, the launcher's) uvloop's.
BOTH_LOOPS = ("test_keepalive", "test_policy_client", "test_openai_chat")


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    module = getattr(item, "module", None)
    if module is not None and module.__name__.rpartition(".")[2] in BOTH_LOOPS:
        return {"asyncio": loops.new_asyncio_loop, "uvloop": loops.new_loop}
    return {"asyncio": loops.new_asyncio_loop}

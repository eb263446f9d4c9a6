"""Small tools for the examples, the demo and the tests (allowlist them to use)."""

from __future__ import annotations

import asyncio
from typing import Any

WORDS = {
    "paris": "the capital of France",
    "python": "a programming language",
    "evalsite": "a dashboard for evaluations",
}


def add(a: float, b: float) -> float:
    return a + b


def lookup(query: str = "") -> dict[str, Any]:
    """What a tiny dictionary says of the words in ``query``."""
    found = {w: WORDS[w] for w in query.lower().split() if w in WORDS}
    return {"query": query, "found": found}


async def slow(seconds: float = 3600.0) -> str:
    await asyncio.sleep(seconds)
    return "slept"


def broken(**arguments: Any) -> None:
    raise RuntimeError("the tool is broken")

"""An offline stand-in for a model: answers arithmetic, with latency and mistakes.

It needs no network, so a fresh install can start a run and watch it finish.
Whether it answers an item right is decided by a hash of the item, so runs are
comparable; its latency and its transient errors are random, like a real
endpoint's.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from typing import Any, ClassVar

from runs.models import ErrorKind
from runs.targets.base import (
    ConfigError,
    TargetError,
    TargetInput,
    TargetOutput,
    register,
)

_ARITHMETIC = re.compile(r"(-?\d+(?:\.\d+)?)\s*([-+*/x\u00d7])\s*(-?\d+(?:\.\d+)?)")


def _fraction(text: str) -> float:
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def solve(text: str) -> str | None:
    match = _ARITHMETIC.search(text)
    if match is None:
        return None
    a, op, b = float(match.group(1)), match.group(2), float(match.group(3))
    if op == "+":
        value = a + b
    elif op == "-":
        value = a - b
    elif op in "*x\u00d7":
        value = a * b
    else:
        if b == 0:
            return None
        value = a / b
    return str(int(value)) if value == int(value) else f"{value:.4g}"


@register
class DemoTarget:
    kind: ClassVar[str] = "demo"
    label: ClassVar[str] = "Offline demo model"

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.random = random.Random()

    @classmethod
    def clean_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        cleaned: dict[str, Any] = {}
        for key, default, low, high in (
            ("min_latency_ms", 50, 0, 60_000),
            ("max_latency_ms", 400, 0, 60_000),
            ("accuracy", 0.8, 0.0, 1.0),
            ("transient_error_rate", 0.03, 0.0, 1.0),
        ):
            raw = config.get(key, default)
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ConfigError(key, f"must be a number, not {raw!r}") from None
            if not low <= value <= high:
                raise ConfigError(key, f"must be between {low} and {high}")
            cleaned[key] = value
        if cleaned["min_latency_ms"] > cleaned["max_latency_ms"]:
            raise ConfigError("min_latency_ms", "must not exceed max_latency_ms")
        return cleaned

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> DemoTarget:
        return cls(cls.clean_config(config))

    async def generate(self, item: TargetInput) -> TargetOutput:
        low, high = self.config["min_latency_ms"], self.config["max_latency_ms"]
        await asyncio.sleep(self.random.uniform(low, high) / 1000)
        if self.random.random() < self.config["transient_error_rate"]:
            raise TargetError(
                "demo model is overloaded (simulated 503)",
                kind=ErrorKind.TRANSIENT,
                http_status=503,
                error_type="HTTP503",
            )
        text = item.input if isinstance(item.input, str) else str(item.input)
        answer = solve(text)
        if answer is None:
            answer = text[::-1]
        elif _fraction(item.external_id) >= self.config["accuracy"]:
            answer = str(int(float(answer)) + 1 + int(_fraction(text) * 9))
        words = len(text.split())
        return TargetOutput(
            output=answer, prompt_tokens=words + 12, completion_tokens=2
        )

    async def aclose(self) -> None:
        return None

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
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

from pydantic import Field, model_validator

from runs.models import ErrorKind
from runs.plugins import FieldError, Params, TargetContext
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
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


# A simulated answer time, and the fraction of calls something happens to.
LatencyMs = Annotated[float, Field(ge=0, le=60_000)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class LatencyRange(Params):
    """Parameters of a simulated answer time from ``min_latency_ms`` to
    ``max_latency_ms`` (each kind declares them, with its defaults)."""

    if TYPE_CHECKING:
        min_latency_ms: float
        max_latency_ms: float

    @model_validator(mode="after")
    def _latency_in_order(self) -> Self:
        if self.min_latency_ms > self.max_latency_ms:
            raise FieldError("min_latency_ms", "must not exceed max_latency_ms")
        return self


class DemoParams(LatencyRange):
    min_latency_ms: LatencyMs = Field(
        50, title="Minimum latency (ms)", description="Shortest simulated answer time."
    )
    max_latency_ms: LatencyMs = Field(
        400, title="Maximum latency (ms)", description="Longest simulated answer time."
    )
    accuracy: Fraction = Field(
        0.8, description="Fraction of arithmetic items answered right."
    )
    transient_error_rate: Fraction = Field(
        0.03, description="Fraction of calls that fail with a simulated 503 (retried)."
    )


@register
class DemoTarget(TargetPlugin[DemoParams]):
    """Answers arithmetic offline, with random latency, mistakes and 503s."""

    kind: ClassVar[str] = "demo"
    label: ClassVar[str] = "Offline demo model"
    example: ClassVar[dict[str, Any]] = {
        "min_latency_ms": 50,
        "max_latency_ms": 400,
        "accuracy": 0.8,
        "transient_error_rate": 0.03,
    }

    def __init__(
        self, params: DemoParams, context: TargetContext | None = None
    ) -> None:
        self.params = params
        self.random = random.Random()

    async def generate(self, item: TargetInput) -> TargetOutput:
        low, high = self.params.min_latency_ms, self.params.max_latency_ms
        await asyncio.sleep(self.random.uniform(low, high) / 1000)
        if self.random.random() < self.params.transient_error_rate:
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
        elif _fraction(item.external_id) >= self.params.accuracy:
            answer = str(int(float(answer)) + 1 + int(_fraction(text) * 9))
        words = len(text.split())
        return TargetOutput(
            output=answer, prompt_tokens=words + 12, completion_tokens=2, model="demo"
        )

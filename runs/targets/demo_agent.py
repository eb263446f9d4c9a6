"""An offline agent for the demo: the ``agent`` target's loop, its model
answered in this process by the demo's agent model.

The model plays an agent as the fake model server does with ``--agent``
(``runs.scripted.agent``): tool calls chosen from the task by a hash, as
many rounds and calls at once as its ``[[agent_rounds:N]]`` and
``[[agent_parallel:N]]`` markers ask, then the answer the demo model computes
(through a ``final_answer`` tool when there is one). The tools are real and
run as an agent's do; every step is kept. It needs no network, so the demo
shows an agent's trajectories without opening loopback to targets.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any, ClassVar

from pydantic import Field

from runs.calls.chat_client import ChatReply
from runs.plugins import SecretRef, TargetContext
from runs.plugins.targets import register
from runs.scripted.agent import agent_reply
from runs.targets.agent import LOOP_EXAMPLE, LoopParams, ToolLoop
from runs.targets.demo import LatencyMs, LatencyRange, solve

DEMO_AGENT_MODEL = "demo-agent"


class DemoAgentParams(LoopParams, LatencyRange):
    model: str = Field(
        DEMO_AGENT_MODEL, description="The model name its model calls are kept with."
    )
    min_latency_ms: LatencyMs = Field(
        20, title="Minimum latency (ms)", description="Shortest simulated model call."
    )
    max_latency_ms: LatencyMs = Field(
        120, title="Maximum latency (ms)", description="Longest simulated model call."
    )


@register
class DemoAgentTarget(ToolLoop[DemoAgentParams]):
    """An agent whose model answers offline: tools called by the task's
    markers, then the demo model's answer; every step kept."""

    kind: ClassVar[str] = "demo_agent"
    label: ClassVar[str] = "Offline demo agent"
    example: ClassVar[dict[str, Any]] = LOOP_EXAMPLE
    secrets: ClassVar[tuple[SecretRef, ...]] = ()
    # Its tools may name secrets (an http tool's credential).
    needs_context: ClassVar[bool] = True

    def __init__(
        self, params: DemoAgentParams, context: TargetContext | None = None
    ) -> None:
        super().__init__(params, context)
        self.random = random.Random()
        self.numbers = itertools.count(1)

    async def complete(self, payload: dict[str, Any]) -> ChatReply:
        """The reply the fake model server gives an agent's request, here."""
        low, high = self.params.min_latency_ms, self.params.max_latency_ms
        await asyncio.sleep(self.random.uniform(low, high) / 1000)
        message, asked, said = agent_reply(payload, next(self.numbers), solve)
        calls = bool(message.get("tool_calls"))
        return ChatReply(
            data={},
            message=message,
            content=message.get("content"),
            prompt_tokens=len(asked.split()),
            completion_tokens=len(said.split()),
            cost=None,
            model=self.params.model,
            http_status=200,
            finish_reason="tool_calls" if calls else "stop",
        )

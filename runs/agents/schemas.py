"""The trajectory endpoint's schemas."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema


class StepOut(Schema):
    index: int
    kind: str = Field(description="model or tool")
    name: str = Field(description="the tool, or the model that answered")
    call_hash: str = Field(
        description="a stable hash of tool and arguments (tool calls)"
    )
    call_id: str
    arguments: Any = Field(
        description="a tool call's arguments; a model call's messages sent "
        "since the previous model call"
    )
    output: Any = Field(
        description="a tool call's result; a model call's reply (with the tool "
        "calls it asked for)"
    )
    arguments_bytes: int = Field(description="the full size of the arguments")
    output_bytes: int = Field(description="the full size of the output")
    cut: bool = Field(description="a payload was cut to its bound")
    error: str
    error_type: str
    latency_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    model: str


class TrajectoryOut(Schema):
    result: int
    run: int
    item_index: int
    epoch: int
    status: str
    count: int = Field(description="steps of the whole trajectory")
    tool_calls: int
    tool_errors: int
    offset: int
    limit: int
    steps: list[StepOut]

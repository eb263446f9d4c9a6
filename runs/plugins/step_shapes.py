"""Trajectories as agents that run elsewhere report them, read into steps.

Two shapes are read (the README's "Agents that run elsewhere" documents them):

- evalsite's own: a list of steps, each an object with ``kind`` ("model" or
  "tool"), ``name`` and, optionally, ``arguments``, ``output``, ``error``,
  ``error_type``, ``latency_ms``, ``prompt_tokens``, ``completion_tokens``,
  ``cost`` and ``call_id``;
- an OpenAI-style message list: each ``assistant`` message is a model call
  (its content and the tool calls it asked for), each tool call it asked for
  a tool call, answered by the ``tool`` message of the same ``tool_call_id``
  (its content the tool's result). ``system`` and ``user`` messages are what
  the next model call was sent.

A list is read as messages when its objects have a ``role``.
"""

from __future__ import annotations

import json
from typing import Any

from runs.plugins.steps import (
    AMOUNT_FIELDS,
    COUNT_FIELDS,
    Step,
    step_amount,
    step_count,
)

KINDS = ("model", "tool")
TEXTS = ("error", "error_type", "call_id")


class ShapeError(ValueError):
    """The trajectory is not in a shape this module reads; says where."""


def read_steps(value: Any) -> list[Step]:
    """The steps of ``value`` in either shape; ShapeError naming what is wrong."""
    if not isinstance(value, list):
        raise ShapeError(f" is {type(value).__name__}, not a list of steps or messages")
    if value and all(isinstance(entry, dict) and "role" in entry for entry in value):
        return steps_from_messages(value)
    return [_step(entry, at=f"[{index}]") for index, entry in enumerate(value)]


def _step(entry: Any, *, at: str) -> Step:
    if not isinstance(entry, dict):
        raise ShapeError(f"{at} is {type(entry).__name__}, not an object")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise ShapeError(f"{at}.kind is {kind!r}; one of model, tool")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ShapeError(f"{at}.name must be a non-empty string")
    step = Step(
        kind=kind,
        name=name[:200],
        arguments=entry.get("arguments"),
        output=entry.get("output"),
    )
    for field in AMOUNT_FIELDS + COUNT_FIELDS:
        read = step_count if field in COUNT_FIELDS else step_amount
        try:
            number = read(entry.get(field))
        except ValueError as exc:
            raise ShapeError(f"{at}.{field} {exc}") from None
        if number is not None:
            setattr(step, field, number)
    for field in TEXTS:
        text = entry.get(field)
        if text is not None:
            setattr(step, field, str(text))
    return step


def steps_from_messages(messages: list[dict[str, Any]]) -> list[Step]:
    """Model and tool calls from an OpenAI-style conversation, in order."""
    steps: list[Step] = []
    results = {
        str(message.get("tool_call_id")): message.get("content")
        for message in messages
        if message.get("role") == "tool"
    }
    sent: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role != "assistant":
            sent.append(message)
            continue
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise ShapeError(f"[{index}].tool_calls must be a list")
        steps.append(
            Step(
                kind="model",
                name=str(message.get("model") or message.get("name") or "assistant"),
                arguments=sent,
                output={"content": message.get("content"), "tool_calls": calls},
            )
        )
        sent = [message]
        for position, call in enumerate(calls):
            steps.append(
                _tool_call(call, results, at=f"[{index}].tool_calls[{position}]")
            )
    return steps


def _tool_call(call: Any, results: dict[str, Any], *, at: str) -> Step:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise ShapeError(f"{at} must be an object with a function")
    function = call["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ShapeError(f"{at}.function.name must be a non-empty string")
    arguments: Any = function.get("arguments")
    step = Step(kind="tool", name=name[:200], call_id=str(call.get("id") or ""))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            step.error = "the model's arguments are not JSON"
            step.error_type = "InvalidArguments"
    step.arguments = arguments
    if step.call_id in results:
        step.output = results[step.call_id]
    elif not step.error:
        step.error = "no tool message answers this call"
        step.error_type = "Unanswered"
    return step

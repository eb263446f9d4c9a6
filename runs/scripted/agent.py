"""An agent's model played by a script, for the fake OpenAI server and the
offline demo agent: tool calls chosen deterministically from the task, then a
final answer once results came back.

A request with ``tools`` is answered so when the server runs with
``agent=True`` (``--agent``) or its task holds ``[[agent]]``. The task is the
conversation's first user message; its markers (``AGENT_MARKERS``) ask for
more rounds, parallel calls, a loop, bad arguments or ignored results. The
tool of each call is chosen by a hash of the task among the tools (but a
final-answer tool), so an item always takes the same path.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from typing import Any

# A prompt marker, ``[[name]]`` or ``[[name:value]]``: what the scripted
# models (this one, the fake server's faults) read from a task.
MARKER = re.compile(r"\[\[(\w+)(?::([^\]]*))?\]\]")
AGENT_MARKERS = {
    "[[agent]]": "with tools: play an agent even when the server was not "
    "started with --agent",
    "[[agent_rounds:N]]": "call tools in N replies before the answer (default 1)",
    "[[agent_parallel:N]]": "N tool calls in each such reply (default 1)",
    "[[agent_loop]]": "call tools forever (a budget must stop it)",
    "[[agent_badargs]]": "the first reply's tool calls have arguments that "
    "are not JSON",
    "[[agent_ignore]]": "repeat the same call each round, whatever it returned",
}
FINAL_NAMES = frozenset({"final_answer", "answer", "finish"})
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def wants_agent(request: dict[str, Any], enabled: bool) -> bool:
    """Whether this request is answered as an agent's model."""
    if not request.get("tools"):
        return False
    return enabled or "[[agent]]" in task_of(request)


def task_of(request: dict[str, Any]) -> str:
    for message in request.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def _rounds_done(messages: list[Any]) -> int:
    return sum(
        1
        for m in messages
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
    )


def _arguments(schema: Any, task: str, round_number: int) -> dict[str, Any]:
    """Arguments that fit a tool's JSON Schema, made from the task."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    numbers = [float(n) for n in NUMBER.findall(task)] or [1.0, 2.0]
    arguments: dict[str, Any] = {}
    for position, (name, spec) in enumerate((properties or {}).items()):
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind in ("number", "integer"):
            value = numbers[position % len(numbers)] + round_number
            arguments[name] = int(value) if kind == "integer" else value
        elif name == "code":
            arguments[name] = f"print(len({task!r}))"
        else:
            arguments[name] = task
    return arguments


def agent_reply(
    request: dict[str, Any], number: int, solve: Callable[[str], str | None]
) -> tuple[dict[str, Any], str, str]:
    """The assistant message for this turn, the text whose words count as the
    prompt's tokens, and the text counted as the completion's."""
    messages = request.get("messages") or []
    task = task_of(request)
    markers = {m.group(1): m.group(2) for m in MARKER.finditer(task)}
    clean = MARKER.sub("", task).strip()
    tools = [t.get("function") or {} for t in request.get("tools") or []]
    final = next((t for t in tools if t.get("name") in FINAL_NAMES), None)
    callable_tools = [t for t in tools if t is not final] or tools
    done = _rounds_done(messages)
    rounds = int(markers.get("agent_rounds") or 1)
    prompt_text = " ".join(
        str(m.get("content") or "") for m in messages if isinstance(m, dict)
    )
    if "agent_loop" in markers or done < rounds:
        parallel = max(1, int(markers.get("agent_parallel") or 1))
        seed = zlib.crc32(clean.encode())
        turn = 0 if "agent_ignore" in markers else done
        calls: list[dict[str, Any]] = []
        for position in range(parallel):
            tool = callable_tools[(seed + turn + position) % len(callable_tools)]
            arguments = json.dumps(
                _arguments(tool.get("parameters"), clean, turn), sort_keys=True
            )
            if "agent_badargs" in markers and done == 0:
                arguments = "{not json"
            calls.append(
                {
                    "id": f"call_{number}_{position}",
                    "type": "function",
                    "function": {"name": tool.get("name"), "arguments": arguments},
                }
            )
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        return message, prompt_text, " ".join(c["function"]["arguments"] for c in calls)
    answer = solve(clean) or clean
    if final is not None:
        arguments = json.dumps({"answer": answer})
        call = {
            "id": f"call_{number}_final",
            "type": "function",
            "function": {"name": final.get("name"), "arguments": arguments},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return message, prompt_text, arguments
    return {"role": "assistant", "content": answer}, prompt_text, answer

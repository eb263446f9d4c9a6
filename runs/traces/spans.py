"""Spans of an instrumented agent read as steps, and the result they belong to.

Two conventions are read:

- OpenTelemetry's GenAI semantic conventions: a span whose
  ``gen_ai.operation.name`` is a model call (``chat``, ``text_completion``,
  ``generate_content``) or ``execute_tool``, with ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` and
  ``output_tokens``, ``gen_ai.input.messages`` and ``output.messages``,
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``arguments`` and
  ``result``;
- OpenInference's: ``openinference.span.kind`` ``LLM`` or ``TOOL``, with
  ``llm.model_name``, ``llm.token_count.prompt`` and ``completion``,
  ``input.value``, ``output.value``, ``tool.name`` and ``tool.parameters``.

Other spans (an agent's own, an HTTP server's) are not steps. A span belongs
to a result by ``evalsite.result_id``, or by ``evalsite.run_id`` with
``evalsite.item_index`` (and ``evalsite.epoch``, 0 when absent), on the
span or its resource; a span without them takes those of another span of
its trace in the same request (the span that read the ``X-Evalsite-*``
headers or the baggage the ``http`` target sends).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runs.plugins.steps import Step, bounded, call_hash, step_count
from runs.traces.otlp import Span

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
KEYS = (
    "evalsite.result_id",
    "evalsite.run_id",
    "evalsite.item_index",
    "evalsite.epoch",
)


@dataclass(frozen=True, slots=True)
class Address:
    """Where a span's step goes: a result by id, or by run, item and epoch."""

    result_id: int | None = None
    run_id: int | None = None
    item_index: int | None = None
    epoch: int = 0

    def lookup(self) -> dict[str, int]:
        """The fields that find its result among a run's."""
        if self.result_id is not None:
            return {"pk": self.result_id}
        return {
            "run_id": self.run_id or 0,
            "item_index": self.item_index or 0,
            "epoch": self.epoch,
        }


def step_of(span: Span) -> Step | None:
    """The step a span records, or None for a span that is not a step."""
    found = span.attributes
    operation = found.get("gen_ai.operation.name")
    kind = str(found.get("openinference.span.kind") or "").upper()
    if operation in MODEL_OPERATIONS or kind == "LLM":
        step = Step(
            kind="model",
            name=str(
                found.get("gen_ai.response.model")
                or found.get("gen_ai.request.model")
                or found.get("llm.model_name")
                or span.name
            ),
            arguments=_first(found, "gen_ai.input.messages", "input.value"),
            output=_first(found, "gen_ai.output.messages", "output.value"),
            prompt_tokens=_count(
                found, "gen_ai.usage.input_tokens", "llm.token_count.prompt"
            ),
            completion_tokens=_count(
                found, "gen_ai.usage.output_tokens", "llm.token_count.completion"
            ),
        )
    elif operation == "execute_tool" or kind == "TOOL":
        step = Step(
            kind="tool",
            name=str(
                found.get("gen_ai.tool.name") or found.get("tool.name") or span.name
            ),
            arguments=_first(
                found, "gen_ai.tool.call.arguments", "tool.parameters", "input.value"
            ),
            output=_first(found, "gen_ai.tool.call.result", "output.value"),
            call_id=str(
                found.get("gen_ai.tool.call.id") or found.get("tool_call.id") or ""
            ),
        )
    else:
        return None
    step.name = step.name[:200]
    step.error, step.error_type = span.error, span.error_type[:200]
    step.latency_ms = span.latency_ms
    return step


def _first(found: dict[str, Any], *keys: str) -> Any:
    """The first attribute present, a JSON text read as its value."""
    for key in keys:
        if key in found:
            text = found[key]
            if isinstance(text, str):
                try:
                    return json.loads(text)
                except ValueError:
                    return text
            return text
    return None


def _count(found: dict[str, Any], *keys: str) -> int | None:
    """The first of these attributes that is a token count (one that is not
    is passed over, as a span's other attributes are)."""
    for key in keys:
        try:
            number = step_count(found.get(key))
        except ValueError:
            continue
        if number is not None:
            return number
    return None


def address_of(found: dict[str, Any]) -> Address | None:
    """The result a span's attributes name; None when they name none.

    ValueError when they name one badly (not a whole number)."""
    if not any(key in found for key in KEYS):
        return None
    numbers = {key: _whole(found, key) for key in KEYS}
    if numbers["evalsite.result_id"] is not None:
        return Address(result_id=numbers["evalsite.result_id"])
    if numbers["evalsite.run_id"] is None or numbers["evalsite.item_index"] is None:
        raise ValueError("evalsite.run_id needs evalsite.item_index beside it")
    return Address(
        run_id=numbers["evalsite.run_id"],
        item_index=numbers["evalsite.item_index"],
        epoch=numbers["evalsite.epoch"] or 0,
    )


def _whole(found: dict[str, Any], key: str) -> int | None:
    raw = found.get(key)
    if raw is None:
        return None
    try:
        number = int(str(raw))
    except ValueError:
        raise ValueError(f"{key} is {raw!r}, not a whole number") from None
    if number < 0:
        raise ValueError(f"{key} is negative")
    return number


def stored_fields(step: Step, span: Span) -> dict[str, Any]:
    """A step's row fields, its payloads bounded, with its span's id and time."""
    arguments, arguments_bytes = bounded(step.arguments)
    output, output_bytes = bounded(step.output)
    return {
        "kind": step.kind,
        "name": step.name,
        "call_hash": call_hash(step.name, step.arguments)
        if step.kind == "tool"
        else "",
        "call_id": step.call_id[:200],
        "arguments": arguments,
        "output": output,
        "arguments_bytes": arguments_bytes,
        "output_bytes": output_bytes,
        "error": step.error,
        "error_type": step.error_type,
        "latency_ms": step.latency_ms,
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "cost": step.cost,
        "model": step.name if step.kind == "model" else "",
        "started_at": span.started_at,
        "span_id": span.span_id,
    }

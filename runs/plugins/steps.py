"""One step of an agent's trajectory, as a target reports it and a scorer reads it.

A result can carry an ordered list of steps: model calls (what was sent and
received, the tool calls asked for, tokens, latency, cost, the model that
answered) and tool calls (tool, arguments, result or error, latency). A
target puts them on ``TargetOutput.steps`` (or on a ``TargetError``'s
``usage`` when the item ends without an answer: a budget, an error); the
executor stores them with the result, in the same transaction
(``runs.models.Step``), and a scorer that declares ``needs_steps`` gets them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runs.models.steps import STEP_PAYLOAD_BYTES

StepKind = Literal["model", "tool"]


@dataclass(slots=True)
class Step:
    """A model call or a tool call of one item's trajectory."""

    kind: StepKind
    # The tool's name, or the model that answered (a model call).
    name: str
    # A tool call's arguments; a model call's messages sent.
    arguments: Any = None
    # A tool call's result; a model call's message received (with the tool
    # calls it asked for).
    output: Any = None
    error: str = ""
    error_type: str = ""
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    # The id the model gave a tool call, which its result answers.
    call_id: str = ""


# A step's numbers, as its sources report them: amounts (latency in
# milliseconds, cost in dollars) and whole counts (tokens).
AMOUNT_FIELDS = ("latency_ms", "cost")
COUNT_FIELDS = ("prompt_tokens", "completion_tokens")


def _number(value: Any) -> int | float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    if value < 0:
        raise ValueError("must not be negative")
    return value


def step_amount(value: Any) -> float | None:
    """A step's latency or cost as a source reported it: None for none;
    ValueError saying what is wrong with one that is not a number of zero or
    more."""
    number = _number(value)
    return None if number is None else float(number)


def step_count(value: Any) -> int | None:
    """A step's token count as a source reported it (a fraction cut to a
    whole number): None for none; ValueError saying what is wrong with one
    that is not a finite number of zero or more."""
    number = _number(value)
    if number is None:
        return None
    try:
        return int(number)
    except (ValueError, OverflowError):
        raise ValueError("must be a finite number") from None


# What of a step may quote a secret (a model or a tool that echoes one): read
# and put back together, to be redacted with the run's secrets before the step
# is scored or stored.
TEXT_FIELDS = ("name", "arguments", "output", "error", "error_type", "call_id")


def step_texts(steps: Sequence[Step]) -> list[list[Any]]:
    """The ``TEXT_FIELDS`` of each step, in order."""
    return [[getattr(step, name) for name in TEXT_FIELDS] for step in steps]


def put_step_texts(steps: Sequence[Step], texts: list[list[Any]]) -> None:
    """Give each step its ``TEXT_FIELDS`` back from ``texts`` (redacted)."""
    for step, values in zip(steps, texts, strict=True):
        for name, value in zip(TEXT_FIELDS, values, strict=True):
            setattr(step, name, value)


def call_hash(name: str, arguments: Any) -> str:
    """A stable hash of a tool call: its tool and arguments, keys sorted.

    The same call hashes alike whatever the order of its keys, and an
    argument that is missing, ``None``, or not JSON (a function, an object)
    still hashes: missing and ``None`` differ; anything else hashes by its
    type's name, never by its address.
    """
    text = json.dumps(
        [name, arguments],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=_stable,
    )
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _stable(value: Any) -> str:
    return f"<{type(value).__name__}>"


def _encoded(value: Any, limit: int) -> tuple[str, str | None, int]:
    """``value``'s compact JSON text, the start of it that fits in ``limit``
    bytes when it is longer (else None), and its full size in bytes."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_stable)
    data = text.encode()
    cut = data[:limit].decode("utf-8", "ignore") if len(data) > limit else None
    return text, cut, len(data)


def bounded(value: Any, limit: int = STEP_PAYLOAD_BYTES) -> tuple[Any, int]:
    """``value`` as kept (cut to ``limit`` bytes of JSON when longer) and its full size.

    A value that is cut is kept as the start of its compact JSON text, so a
    cut payload is never mistaken for the whole.
    """
    if value is None:
        return None, 0
    _, cut, size = _encoded(value, limit)
    return (value if cut is None else cut), size


def bounded_json(value: Any, limit: int = STEP_PAYLOAD_BYTES) -> tuple[str | None, int]:
    """``bounded(value)`` as the JSON text that is stored (None for None),
    and the full size: the value encoded once."""
    if value is None:
        return None, 0
    text, cut, size = _encoded(value, limit)
    return (text if cut is None else json.dumps(cut)), size

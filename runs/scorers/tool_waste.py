"""Tool calls the agent wasted: failures repeated as they were, results never used."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, register
from runs.plugins.steps import Step
from runs.scorers.trajectory import ToolCall, ToolCallScorer, describe

# A result is looked for in later messages by this many of its first characters.
FINGERPRINT_CHARS = 200


class ToolWasteParams(Params):
    max_wasted: int = Field(
        0, ge=0, le=10_000_000, description="Most wasted tool calls allowed."
    )
    repeated_failures: bool = Field(
        True,
        description="Count a call made again as it was after the same call failed.",
    )
    unused_results: bool = Field(
        True,
        description="Count a call whose result no later model call was sent.",
    )
    ignore_tools: list[str] = Field(
        default_factory=lambda: ["final_answer"],
        max_length=100,
        description=(
            "Tools whose results are never sent back (the final answer): not "
            "counted as unused."
        ),
    )


def message_texts(step: Step) -> tuple[set[str], str]:
    """What a model call was sent: the tool call ids its tool messages answer,
    and the text of its messages (their contents, joined)."""
    messages = step.arguments
    if isinstance(messages, dict):
        messages = messages.get("messages")
    if isinstance(messages, str):
        return set(), messages  # cut: the start of its JSON text
    ids: set[str] = set()
    texts: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("tool_call_id"), str):
            ids.add(message["tool_call_id"])
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
    return ids, "\n".join(texts)


def fingerprints(output: Any) -> list[str]:
    """The start of a result as an agent may have sent it on: the text itself,
    or its JSON written compactly or with spaces."""
    if output is None:
        return []
    if isinstance(output, str):
        texts = [output]
    else:
        texts = [
            json.dumps(output, ensure_ascii=False, separators=(",", ":")),
            json.dumps(output, ensure_ascii=False),
        ]
    return [text[:FINGERPRINT_CHARS] for text in texts if text.strip()]


def unused(
    steps: list[Step], calls: list[ToolCall], ignore: set[str]
) -> list[ToolCall]:
    """Succeeded calls whose result reached no later model call: none of the
    later model calls was sent a message answering the call's id, nor holding
    the start of its result (``FINGERPRINT_CHARS``)."""
    sent = [
        (position, *message_texts(step))
        for position, step in enumerate(steps)
        if step.kind == "model"
    ]
    last_seen: dict[str, int] = {}
    for position, ids, _text in sent:
        for call_id in ids:
            last_seen[call_id] = position
    wasted = []
    for call in calls:
        if call.failed or call.name in ignore:
            continue
        if call.step.call_id and last_seen.get(call.step.call_id, -1) > call.position:
            continue
        prints = fingerprints(call.step.output)
        later = (text for position, _ids, text in sent if position > call.position)
        if prints and any(p in text for text in later for p in prints):
            continue
        wasted.append(call)
    return wasted


def repeated_failures(calls: list[ToolCall]) -> list[ToolCall]:
    """Calls made again, the same tool with the same arguments, after that
    very call had failed."""
    failed: set[str] = set()
    repeats = []
    for call in calls:
        if call.key in failed:
            repeats.append(call)
        if call.failed:
            failed.add(call.key)
    return repeats


@register
class ToolWaste(ToolCallScorer[ToolWasteParams]):
    """Counts wasted tool calls; passes with at most ``max_wasted`` of them.

    A call is wasted when it repeats a failed call unchanged (same tool, same
    arguments, by their stable hash), or when it succeeded and its result was
    never used: no later model call was sent it, that is, no message of a
    later call answers its call id (a ``tool`` message's ``tool_call_id``) or
    holds the start of its result. Tools in ``ignore_tools`` (the final
    answer) are never counted unused. The value is the share of tool calls
    not wasted (1 with none).
    """

    kind: ClassVar[str] = "tool_waste"
    label: ClassVar[str] = "Tool waste"
    example: ClassVar[dict[str, Any]] = {"max_wasted": 0}

    def score_trajectory(
        self, calls: list[ToolCall], steps: list[Step]
    ) -> ScoreOutcome:
        repeats = repeated_failures(calls) if self.params.repeated_failures else []
        never_used = (
            unused(steps, calls, set(self.params.ignore_tools))
            if self.params.unused_results
            else []
        )
        wasted = {call.position for call in [*repeats, *never_used]}
        value = 1.0 - len(wasted) / len(calls) if calls else 1.0
        parts = [f"{len(wasted)} of {len(calls)} tool calls wasted"]
        if repeats:
            parts.append(
                f"{len(repeats)} repeated a failed call, first {describe(repeats[0])}"
            )
        if never_used:
            parts.append(
                f"{len(never_used)} with a result never used, first "
                f"{describe(never_used[0])}"
            )
        passed = len(wasted) <= self.params.max_wasted
        return ScoreOutcome(value, passed, "; ".join(parts))

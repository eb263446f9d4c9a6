"""The fake OpenAI server's judge: its verdict on a prompt that asks to grade."""

from __future__ import annotations

import json
import re
from typing import Any

# A request whose messages ask to grade is answered as a judge (judge_reply).
GRADING = re.compile(r"\bgrad(?:e|er|ing)\b", re.IGNORECASE)
_SECTION = r"^{label}:[ \t]*\n?(.*?)(?=\n[ \t]*\n|\Z)"
_ANSWER = re.compile(_SECTION.format(label="Answer"), re.MULTILINE | re.DOTALL)
_REFERENCE = re.compile(
    _SECTION.format(label="Reference(?: answer)?"),
    re.MULTILINE | re.DOTALL | re.IGNORECASE,
)
_JSON_VERDICT_KEY = re.compile(r'"(\w+)":\s*"pass" or "fail"')
_JSON_SCORE_KEY = re.compile(r'"(\w+)":\s*a number')


def _normal(text: str) -> str:
    return " ".join(text.split()).rstrip(".").casefold()


def judge_decision(prompt: str) -> tuple[bool, str]:
    """Whether the answer of a grading prompt passes, and why (judge_reply)."""
    answers = _ANSWER.findall(prompt)
    references = _REFERENCE.findall(prompt)
    answer = answers[-1].strip() if answers else ""
    if references:
        passed = _normal(answer) == _normal(references[-1])
        why = (
            "The answer matches the reference."
            if passed
            else f"The answer {answer[:80]!r} does not match the reference "
            f"{references[-1].strip()[:80]!r}."
        )
    else:
        passed = bool(answer)
        why = "The answer is there." if passed else "There is no answer."
    return passed, why


def prose_reply(prompt: str) -> str:
    """What a small model answers to a grading prompt when nothing constrains
    it: prose about the question, with no verdict in it."""
    references = _REFERENCE.findall(prompt)
    expected = references[-1].strip()[:80] if references else "something else"
    return f'The answer to the question should be "{expected}".'


def schema_reply(schema: dict[str, Any], passed: bool, why: str) -> dict[str, Any]:
    """A JSON object that matches a verdict's schema: each string property
    with "pass"/"fail" among its values gets the verdict, each number its
    maximum (passed) or minimum, each other string the reasoning."""
    reply: dict[str, Any] = {}
    properties = schema.get("properties")
    for key, spec in (properties if isinstance(properties, dict) else {}).items():
        spec = spec if isinstance(spec, dict) else {}
        if {"pass", "fail"} <= set(spec.get("enum") or ()):
            reply[key] = "pass" if passed else "fail"
        elif spec.get("type") in ("integer", "number"):
            reply[key] = spec.get("maximum", 1) if passed else spec.get("minimum", 0)
        elif spec.get("type") == "boolean":
            reply[key] = passed
        else:
            reply[key] = why
    return reply


def judge_reply(prompt: str) -> str:
    """What the fake judge answers to a grading prompt (markers removed).

    The convention: the answer is the text after a line ``Answer:`` up to a
    blank line, the reference the text after ``Reference answer:`` (or
    ``Reference:``) likewise. The answer passes when it equals the reference,
    ignoring case, surrounding whitespace and a final full stop; without a
    reference, when it is not empty. The reply is a reasoning line and the
    verdict in the form the prompt asks for: a JSON object (when the prompt
    says JSON, with the keys it names for "pass" or "fail" and for a
    number), "Score: 5" or "Score: 1" (when it asks for 1 to 5), "Score: 10"
    or "Score: 0" (0 to 10), otherwise "Verdict: PASS" or "Verdict: FAIL".
    """
    passed, why = judge_decision(prompt)
    if "JSON" in prompt:
        verdict_key = _JSON_VERDICT_KEY.search(prompt)
        score_key = _JSON_SCORE_KEY.search(prompt)
        reply: dict[str, Any] = {"reasoning": why}
        if verdict_key:
            reply[verdict_key.group(1)] = "pass" if passed else "fail"
        if score_key:
            reply[score_key.group(1)] = 1 if passed else 0
        return json.dumps(reply)
    if "1 to 5" in prompt:
        return f"{why}\nScore: {5 if passed else 1}"
    if "0 to 10" in prompt:
        return f"{why}\nScore: {10 if passed else 0}"
    return f"{why}\nVerdict: {'PASS' if passed else 'FAIL'}"


def schema_of(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema a response_format constrains the reply to, in OpenAI's
    form ({"type": "json_schema", "json_schema": {"schema": ...}}) or
    llama.cpp's ({"type": "json_object", "schema": ...})."""
    if not isinstance(response_format, dict):
        return None
    schema = response_format.get("schema")
    wrapper = response_format.get("json_schema")
    if response_format.get("type") == "json_schema" and isinstance(wrapper, dict):
        schema = wrapper.get("schema")
    return schema if isinstance(schema, dict) else None


def judge_content(response_format: Any, prompt: str, *, prose: bool = False) -> str:
    """The fake judge's reply: an object that matches the schema of the
    request's response_format, else its reply in prose (``prose``: as a small
    model's, with no verdict in it)."""
    schema = schema_of(response_format)
    if schema is not None:
        passed, why = judge_decision(prompt)
        return json.dumps(schema_reply(schema, passed, why))
    if prose:
        return prose_reply(prompt)
    return judge_reply(prompt)


def format_refusal(
    response_format: Any, accepted: frozenset[str]
) -> dict[str, Any] | None:
    """The error body with which a server that takes only the ``accepted``
    response_format types refuses another (as an older server refuses
    json_schema), or None."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind in accepted:
        return None
    takes = " or ".join(f"'{k}'" for k in sorted(accepted))
    return {
        "error": {
            "message": f"response_format.type must be {takes}, not {kind!r}",
            "type": "invalid_request_error",
            "param": "response_format",
        }
    }

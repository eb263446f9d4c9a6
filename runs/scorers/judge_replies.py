"""Structured judge replies: the JSON schema of each verdict format, the
``response_format`` forms an endpoint may take, and what each endpoint is
known to accept.

A small model asked in prose for "Verdict: PASS" often answers with no
verdict line at all; asked for a reply constrained by a schema it answers
``{"verdict": "fail"}``. Endpoints differ in how they take a schema: OpenAI's
``{"type": "json_schema", "json_schema": {...}}``, llama.cpp's server also
``{"type": "json_object", "schema": {...}}``, and older servers neither. The
judge tries them in that order, once per endpoint (base URL) in the process,
and remembers the first one that is not refused. The readers of a reply in
prose ("Verdict: PASS", "Score: 4", a JSON object in text) are here too.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal, TypeGuard

from runs.plugins.targets import TargetError

# How a judge asks for its reply: "auto" finds out what the endpoint takes.
StructuredReply = Literal["auto", "json_schema", "json_object", "off"]
# The forms, in the order "auto" tries them; "text" is no response_format.
Form = Literal["json_schema", "json_object", "text"]
FORMS: tuple[Form, ...] = ("json_schema", "json_object", "text")
SCHEMA_NAME = "judge_verdict"
REASONING = "reasoning"
SCALE_BOUNDS = {"scale_1_5": (1, 5), "scale_0_10": (0, 10)}
# Statuses with which a server refuses a request it cannot take.
REFUSALS = frozenset({400, 422})
# Words of a refusal's body that say it is about the response format.
REFUSAL_WORDS = ("response_format", "json_schema")

PASS_WORDS = frozenset({"pass", "passed", "yes", "correct", "true", "right"})
FAIL_WORDS = frozenset({"fail", "failed", "no", "incorrect", "false", "wrong"})
_VERDICT = re.compile(
    r"\bverdict\b\W{0,3}\s*(pass(?:ed)?|fail(?:ed)?|yes|no|correct|incorrect)\b",
    re.IGNORECASE,
)
_SCORE = re.compile(
    r"\b(?:score|rating|grade)\b\W{0,3}\s*(-?\d+(?:\.\d+)?)(?:\s*/\s*\d+)?",
    re.IGNORECASE,
)
_BARE_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d+)?)(?:\s*/\s*\d+)?\s*[.!]?\s*")

# What each endpoint (by base URL) was found to take, in this process.
_ACCEPTED: dict[str, Form] = {}


def verdict_schema(
    verdict_format: str, *, verdict_key: str = "verdict", score_key: str = "score"
) -> dict[str, Any]:
    """The JSON schema of a reply in ``verdict_format``: the reasoning first
    (a model that reasons before it decides decides better), then the
    verdict. Every property is required and no other allowed, as OpenAI's
    strict mode needs."""
    properties: dict[str, Any] = {REASONING: {"type": "string"}}
    if verdict_format == "pass_fail":
        properties["verdict"] = {"type": "string", "enum": ["pass", "fail"]}
    elif verdict_format in SCALE_BOUNDS:
        low, high = SCALE_BOUNDS[verdict_format]
        properties["score"] = {"type": "integer", "minimum": low, "maximum": high}
    elif verdict_format == "json":
        properties[verdict_key] = {"type": "string", "enum": ["pass", "fail"]}
        if score_key != verdict_key:
            properties[score_key] = {"type": "number", "minimum": 0, "maximum": 1}
    else:
        raise ValueError(f"verdict_format: no schema for {verdict_format!r}")
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def structured_instructions(verdict_format: str, schema: dict[str, Any]) -> str:
    """The prompt's ``{format}`` when the reply is constrained to ``schema``."""
    fields = []
    for key, spec in schema["properties"].items():
        if key == REASONING:
            fields.append(f'"{key}": "..."')
        elif "enum" in spec:
            fields.append(f'"{key}": "pass" or "fail"')
        else:
            best = "" if verdict_format == "json" else f" ({spec['maximum']} is best)"
            fields.append(
                f'"{key}": a number from {spec["minimum"]} to {spec["maximum"]}{best}'
            )
    return f"Reply with only a JSON object: {{{', '.join(fields)}}}."


def response_format(form: Form, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``response_format`` in ``form`` (None for plain text)."""
    if form == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": schema},
        }
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def forms_to_try(base_url: str, wanted: StructuredReply) -> list[Form]:
    """The forms to ask in, best first: what the endpoint is known to take
    and those after it (in case it stopped taking it), or all for a new one."""
    if wanted == "off":
        return ["text"]
    if wanted != "auto":
        return [wanted]
    known = _ACCEPTED.get(base_url)
    start = FORMS.index(known) if known else 0
    return list(FORMS[start:])


def remember(base_url: str, form: Form) -> None:
    """The endpoint answered a request asked in ``form``."""
    _ACCEPTED[base_url] = form


def accepted(base_url: str) -> Form | None:
    """The form the endpoint is known to take, if it was asked yet."""
    return _ACCEPTED.get(base_url)


def forget_endpoints() -> None:
    """Forget what every endpoint takes (a server replaced at the same URL)."""
    _ACCEPTED.clear()


class FormatRefused(Exception):
    """The endpoint refused the response format it was asked for."""

    def __init__(self, failure: TargetError) -> None:
        super().__init__(failure.message)
        self.failure = failure


def refuses_format(failure: TargetError) -> bool:
    """Whether a failed call is the endpoint refusing the response format."""
    if failure.http_status not in REFUSALS:
        return False
    text = f"{failure.raw_body or ''} {failure.message}".casefold()
    return any(word in text for word in REFUSAL_WORDS)


# -- reading a reply ----------------------------------------------------------


def is_number(value: Any) -> TypeGuard[float]:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def word_verdict(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().strip(".!").casefold()
        if word in PASS_WORDS:
            return True
        if word in FAIL_WORDS:
            return False
    return None


def read_pass_fail(text: str) -> tuple[float, bool]:
    found = _VERDICT.findall(text)
    if found:
        passed = word_verdict(found[-1])
    else:  # a reply that is just the word
        passed = word_verdict(text.strip().strip("*`\"'"))
    if passed is None:
        raise ValueError('no "Verdict: PASS" or "Verdict: FAIL" in the reply')
    return float(passed), passed


def read_score(text: str) -> float:
    found = _SCORE.findall(text)
    if found:
        return float(found[-1])
    bare = _BARE_NUMBER.fullmatch(text.strip().strip("*`"))
    if bare:
        return float(bare.group(1))
    raise ValueError('no "Score: N" in the reply')


def json_object(text: str) -> dict[str, Any]:
    """The JSON object of a reply, also inside a ```json fence or prose."""
    candidates = [text.strip()]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    raise ValueError("the reply holds no JSON object")

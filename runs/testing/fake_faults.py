"""What makes the fake OpenAI server misbehave: prompt markers and a fault mix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# What each marker in the last message's content does; markers are removed
# from the prompt before it is answered.
PROMPT_MARKERS = {
    "[[latency:MS]]": "answer after MS milliseconds (instead of --latency-ms)",
    "[[hang]]": "never answer, until the client closes the connection",
    "[[status:CODE]]": "answer with HTTP status CODE (default 500) and an "
    "OpenAI-style error body",
    "[[retry_after:S]]": "with [[status:CODE]] or [[flaky:N]]: add a "
    "Retry-After: S header",
    "[[quota]]": "429 whose body says the quota is exhausted (insufficient_quota)",
    "[[malformed]]": "200 whose JSON has no choices",
    "[[badjson]]": "200 whose body is not JSON",
    "[[empty]]": "a legitimately empty completion",
    "[[nocontent]]": "200 whose message has no content (as a content filter "
    "answers), with its usage",
    "[[wrong]]": "a wrong answer (the right one with a 1 appended)",
    "[[flaky:N]]": "the first N requests with this exact prompt get a 500 "
    "(default 1), later ones are answered",
    "[[tool:NAME]]": "a reply that calls tool NAME (default: the request's "
    'first tool) with {"query": the prompt}, and no content',
    "[[flaky_status:CODE]]": "with [[flaky:N]]: those first requests get CODE "
    "(503, 429, ...) instead of 500",
    "[[unparseable]]": "a reply that holds no verdict or score, whatever was asked",
    "[[echo_key:FORM]]": "echo the request's key (after Bearer) in FORM (exact, "
    "reversed, base64, base64url, hex, spaced, url, html; unicode: \\uXXXX in "
    "the body) in the content, the model, a tool call, a [[status]] error and a "
    "[[malformed]] answer",
}


@dataclass
class FaultMix:
    """Probabilities of misbehaviour applied to every request."""

    error_500: float = 0.0
    error_429: float = 0.0
    retry_after: str = "1"
    hang: float = 0.0
    malformed: float = 0.0


def marked_fault(
    markers: dict[str, str],
    *,
    seen: int,
    draw: Callable[[], float],
    mix: FaultMix,
    http: Callable[..., bytes],
    echo: str,
    escape: str,
) -> bytes | None:
    """The failure a prompt's markers ask for (``seen``: how many times this
    prompt came, for ``flaky``), or one the fault mix draws with ``draw``;
    None when the call is to be answered."""
    if "flaky" in markers and seen <= int(markers["flaky"] or 1):
        status = int(markers.get("flaky_status") or 500)
        extra = (
            {"Retry-After": markers["retry_after"]} if "retry_after" in markers else {}
        )
        return http(status, {"error": {"message": "flaky upstream"}}, extra)
    if "quota" in markers:
        return http(
            429,
            {
                "error": {
                    "message": "You exceeded your current quota",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            },
        )
    if "status" in markers:
        status = int(markers["status"] or 500)
        extra = (
            {"Retry-After": markers["retry_after"]} if "retry_after" in markers else {}
        )
        message = f"simulated {status}" + (f" for key {echo}" if echo else "")
        return http(status, {"error": {"message": message}}, extra, escape)
    roll = draw()
    if roll < mix.error_500:
        return http(500, {"error": {"message": "simulated 500"}})
    if roll < mix.error_500 + mix.error_429:
        return http(
            429,
            {"error": {"message": "rate limited"}},
            {"Retry-After": mix.retry_after},
        )
    if "malformed" in markers or roll < mix.error_500 + mix.error_429 + mix.malformed:
        body: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion"}
        return http(200, {**body, **({"key": echo} if echo else {})}, None, escape)
    return None

"""A call to an OpenAI-compatible ``/chat/completions`` endpoint, shared by the
``openai_chat`` target and the ``llm_judge`` scorer.

Both declare the endpoint the same way (``EndpointParams``: base URL, model and
the API key as a project secret), send requests through the operator's network
policy, and classify a failed call the same way (``TargetError`` with its
``ErrorKind``: transient, quota or permanent), so the executor's retry rules
apply to both alike.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from pydantic import Field, field_validator, model_validator

from runs.errors import ConfigError
from runs.models import ErrorKind
from runs.netpolicy import (
    clean_target_url,
    current_policy,
    endpoint_url,
    policy_session,
    refusal_in,
)
from runs.plugins import FieldError, Params
from runs.secrets import SecretRef, TargetContext, clean_secret_refs
from runs.targets.base import TargetError

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
QUOTA_WORDS = (
    "insufficient_quota",
    "quota exceeded",
    "exceeded your current quota",
    "billing",
)
MAX_RETRY_AFTER_SECONDS = 60.0
# An error body is kept in the attempt log up to this many characters, and its
# JSON message quoted in the error up to ERROR_MESSAGE_LIMIT: enough to debug a
# provider's error, too little to read a page back through the endpoint.
ERROR_BODY_LIMIT = 4096
ERROR_MESSAGE_LIMIT = 300
# Per-attempt timeouts are the caller's job; this backstop only makes sure
# that no socket outlives its purpose.
BACKSTOP_TIMEOUT = {"connect": 30.0, "read": 600.0, "write": 600.0, "pool": 600.0}
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


class MissingField(LookupError):
    """A template names a field the values do not have."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def fill_template(template: str, fields: dict[str, Any]) -> str:
    """Replace each ``{name}`` or ``{name.key}`` with its value from ``fields``.

    Only dictionary look-ups are done, never attribute access, so a template
    cannot reach into Python objects. A string goes in as it is, anything
    else as JSON. Braces that do not enclose a name (a JSON example) stay.
    """

    def lookup(match: re.Match[str]) -> str:
        value: Any = fields
        for part in match.group(1).split("."):
            if not isinstance(value, dict) or part not in value:
                raise MissingField(match.group(1))
            value = value[part]
        if isinstance(value, str):
            return value
        return json.dumps(value)

    return PLACEHOLDER.sub(lookup, template)


def template_names(template: str) -> list[str]:
    """The ``{names}`` a template uses, in order."""
    return [match.group(1) for match in PLACEHOLDER.finditer(template)]


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def error_summary(response: httpx.Response) -> str:
    """The status line and, from a JSON error body, its message in short.

    The endpoint is chosen by the user, so its error page is never echoed
    whole: a JSON ``error.message`` (or ``message``/``detail``) up to
    ``ERROR_MESSAGE_LIMIT`` characters, printable characters only.
    """
    # The standard phrase, not the server's: a reason phrase can carry anything.
    reason = httpx.codes.get_reason_phrase(response.status_code)
    status = f"HTTP {response.status_code} {reason}".rstrip()
    try:
        data = json.loads(response.content[:ERROR_BODY_LIMIT])
    except ValueError:
        return status
    message: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        message = message or data.get("message") or data.get("detail")
    if not isinstance(message, str) or not message.strip():
        return status
    text = "".join(ch if ch.isprintable() else " " for ch in message).strip()
    if len(text) > ERROR_MESSAGE_LIMIT:
        text = text[: ERROR_MESSAGE_LIMIT - 1] + "…"
    return f"{status}: {text}"


def classify_status(status: int, body: str) -> ErrorKind:
    if status == 429 and any(word in body.lower() for word in QUOTA_WORDS):
        return ErrorKind.QUOTA
    if status in TRANSIENT_STATUSES:
        return ErrorKind.TRANSIENT
    return ErrorKind.PERMANENT


# -- the endpoint, declared -------------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The key is a project secret named in api_key_secret, or an environment
# variable the operator allows (EVALSITE_ENV_SECRETS) named in api_key_env,
# which may only be sent to the hosts it is bound to.
SECRETS = (
    SecretRef(
        key="api_key",
        secret_field="api_key_secret",
        env_field="api_key_env",
        url_field="base_url",
        help="sent as a Bearer token to base_url",
    ),
)


class EndpointParams(Params):
    """Where an OpenAI-compatible endpoint is, which model, and its key's name."""

    base_url: str = Field(
        title="Base URL",
        description="The API's base URL, before /chat/completions.",
        examples=["https://api.openai.com/v1"],
    )
    model: str = Field(description="Model name sent with every request.")
    api_key_secret: str = Field(
        "",
        max_length=100,
        title="API key secret",
        description="Name of the project secret that holds the API key.",
    )
    api_key_env: str = Field(
        "",
        max_length=100,
        title="API key environment variable",
        description=(
            "Name of an environment variable that holds the API key (only "
            "those the operator allows)."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _no_stored_secret(cls, data: Any) -> Any:
        if isinstance(data, dict) and "api_key" in data:
            raise FieldError(
                "api_key",
                "secrets are never stored in a configuration; set the key as a "
                "project secret and name it in api_key_secret",
            )
        return data

    @field_validator("base_url")
    @classmethod
    def _target_url(cls, value: str) -> str:
        # http(s) only; no userinfo, query or fragment; a host the network
        # policy could ever allow (the real check is at connect time).
        return clean_target_url(value)

    @field_validator("model")
    @classmethod
    def _model_named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is required")
        return value

    @field_validator("api_key_env", "api_key_secret")
    @classmethod
    def _a_name(cls, value: str) -> str:
        if value and not _NAME.fullmatch(value):
            raise ValueError("must be a name (letters, digits and _), not a value")
        return value

    @model_validator(mode="after")
    def _secrets_allowed(self) -> EndpointParams:
        # An environment variable only if the operator lists it, and only to
        # the hosts it is bound to; one message whether or not it exists.
        try:
            clean_secret_refs(SECRETS, self.model_dump())
        except ConfigError as exc:
            raise FieldError(exc.field or "api_key_env", exc.message) from None
        return self


# -- the call ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A 200 answer: its message, usage, and the status it came with."""

    data: dict[str, Any]
    message: dict[str, Any]
    content: Any
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    model: str
    http_status: int


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cost_of(usage: dict[str, Any]) -> float | None:
    # Some gateways (OpenRouter, LiteLLM) report what a call cost.
    cost = usage.get("cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
        return float(cost)
    return None


class ChatClient:
    """Sends chat-completion requests to one endpoint with one key."""

    def __init__(self, config: dict[str, Any], context: TargetContext | None) -> None:
        context = context or TargetContext()
        # Parsed once: httpx would parse a string URL on every request.
        self.url = endpoint_url(config["base_url"], "chat/completions")
        headers = {"Content-Type": "application/json"}
        key = context.secrets.get("api_key")
        if key:
            if not key.isascii() or not key.isprintable():
                raise ConfigError(
                    "the key holds characters a header cannot carry",
                    field="api_key_secret",
                )
            headers["Authorization"] = f"Bearer {key}"
        elif config.get("api_key_secret") or config.get("api_key_env"):
            raise ConfigError(
                "the key was not resolved for this project", field="api_key_secret"
            )
        self.secrets = tuple(value for value in context.secrets.values() if value)
        self.headers = httpx.Headers(headers)
        # httpx's own connection pool spends milliseconds per request at high
        # concurrency, and its client adds auth, redirect and cookie handling
        # that a POST to a model endpoint never needs: requests go straight to
        # a transport over aiohttp's pool (the caller bounds the calls in
        # flight), whose connector lets through only the addresses the
        # network policy permits.
        policy = current_policy()
        self.transport = AiohttpTransport(client=lambda: policy_session(policy))

    async def post(self, payload: dict[str, Any]) -> httpx.Response:
        """POST the payload; a connection failure is a TargetError."""
        try:
            request = httpx.Request(
                "POST",
                self.url,
                headers=self.headers,
                json=payload,
                extensions={"timeout": BACKSTOP_TIMEOUT},
            )
            response = await self.transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except (httpx.TransportError, aiohttp.ClientError) as exc:
            refusal = refusal_in(exc)
            if refusal is not None:
                raise TargetError(
                    str(refusal), kind=ErrorKind.PERMANENT, error_type="NetworkPolicy"
                ) from None
            # The transport maps aiohttp's errors to httpx's loosely (a refused
            # connection becomes ConnectTimeout): report the original.
            cause = (
                exc.__cause__ if isinstance(exc.__cause__, aiohttp.ClientError) else exc
            )
            raise TargetError(
                f"{type(cause).__name__}: {cause}",
                kind=ErrorKind.TRANSIENT,
                error_type=type(cause).__name__,
            ) from exc
        return response

    async def complete(self, payload: dict[str, Any]) -> ChatReply:
        """One request and its answer, or a classified TargetError."""
        return parse_chat_response(await self.post(payload))

    async def aclose(self) -> None:
        await self.transport.aclose()


def parse_chat_response(response: httpx.Response) -> ChatReply:
    """The reply of a 200, or a TargetError classified by status (body kept)."""
    body = response.text
    if response.status_code >= 400:
        raise TargetError(
            error_summary(response),
            kind=classify_status(response.status_code, body),
            http_status=response.status_code,
            raw_body=body[:ERROR_BODY_LIMIT],
            retry_after=parse_retry_after(response.headers.get("retry-after")),
            error_type=f"HTTP{response.status_code}",
        )
    try:
        data = response.json()
        message = data["choices"][0]["message"]
        content = message.get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise TargetError(
            f"malformed response: {type(exc).__name__}: {exc}",
            kind=ErrorKind.PERMANENT,
            http_status=response.status_code,
            raw_body=body[:ERROR_BODY_LIMIT],
            error_type="MalformedResponse",
        ) from exc
    if content is None and not message.get("tool_calls"):
        raise TargetError(
            "malformed response: message has no content",
            kind=ErrorKind.PERMANENT,
            http_status=response.status_code,
            raw_body=body[:ERROR_BODY_LIMIT],
            error_type="MalformedResponse",
        )
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    model = data.get("model")
    return ChatReply(
        data=data,
        message=message,
        content=content,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        cost=_cost_of(usage),
        model=model if isinstance(model, str) else "",
        http_status=response.status_code,
    )

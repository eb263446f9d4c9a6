"""Any OpenAI-compatible ``/chat/completions`` endpoint, over httpx."""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Any, ClassVar

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
from runs.plugins import FieldError, Params, Plugin
from runs.secrets import SecretRef, TargetContext, clean_secret_refs
from runs.targets.base import (
    TargetError,
    TargetInput,
    TargetOutput,
    register,
)

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
# Per-attempt timeouts are the executor's job; this backstop only makes sure
# that no socket outlives its purpose.
BACKSTOP_TIMEOUT = {"connect": 30.0, "read": 600.0, "write": 600.0, "pool": 600.0}
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


def render_prompt(template: str, item: TargetInput) -> str:
    """Fill ``{input}``, ``{expected}``, ``{id}`` and ``{metadata.key}`` from the item.

    Only dictionary look-ups are done, never attribute access, so a template
    cannot reach into Python objects.
    """
    fields: dict[str, Any] = {
        "input": item.input,
        "expected": item.expected,
        "id": item.external_id,
        "index": item.index,
        "metadata": item.metadata,
    }
    if isinstance(item.input, dict):
        fields = {**item.input, **fields}

    def lookup(match: re.Match[str]) -> str:
        value: Any = fields
        for part in match.group(1).split("."):
            if not isinstance(value, dict) or part not in value:
                raise TargetError(
                    f"prompt template names {{{match.group(1)}}}, which item "
                    f"{item.external_id!r} does not have",
                    kind=ErrorKind.PERMANENT,
                    error_type="TemplateError",
                )
            value = value[part]
        return value if isinstance(value, str) else json.dumps(value)

    return _PLACEHOLDER.sub(lookup, template)


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


class OpenAIChatParams(Params):
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
    system_prompt: str = Field(
        "",
        description="Sent first, as the system message; empty for none.",
        json_schema_extra={"x-widget": "textarea"},
    )
    prompt_template: str = Field(
        "{input}",
        description=(
            "The user message: {input}, {expected}, {id} and {metadata.key} are "
            "filled from the item. An input that is a list of messages is sent "
            "as it is."
        ),
        json_schema_extra={"x-widget": "textarea"},
    )
    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature; empty for the default."
    )
    max_tokens: int | None = Field(
        None, ge=1, le=10_000_000, description="Most tokens an answer may have."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Further JSON fields of every request body (top_p, seed, ...).",
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
    def _secrets_allowed(self) -> OpenAIChatParams:
        # An environment variable only if the operator lists it, and only to
        # the hosts it is bound to; one message whether or not it exists.
        try:
            clean_secret_refs(SECRETS, self.model_dump())
        except ConfigError as exc:
            raise FieldError(exc.field or "api_key_env", exc.message) from None
        return self


@register
class OpenAIChatTarget(Plugin):
    """Any OpenAI-compatible /chat/completions endpoint (OpenAI, vLLM, Ollama, ...)."""

    kind: ClassVar[str] = "openai_chat"
    label: ClassVar[str] = "OpenAI-compatible chat endpoint"
    Params = OpenAIChatParams
    example: ClassVar[dict[str, Any]] = {
        "base_url": "https://api.openai.com/v1",
        "model": "gpt-4o-mini",
        "api_key_secret": "OPENAI_API_KEY",
        "system_prompt": "",
        "prompt_template": "{input}",
        "temperature": 0,
        "max_tokens": 256,
    }
    secrets: ClassVar[tuple[SecretRef, ...]] = SECRETS

    def __init__(
        self, config: dict[str, Any], context: TargetContext | None = None
    ) -> None:
        self.config = config
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
        self.headers = httpx.Headers(headers)
        # httpx's own connection pool spends milliseconds per request at high
        # concurrency, and its client adds auth, redirect and cookie handling
        # that a POST to a model endpoint never needs: requests go straight to
        # a transport over aiohttp's pool (the executor bounds the calls in
        # flight), whose connector lets through only the addresses the
        # network policy permits.
        policy = current_policy()
        self.transport = AiohttpTransport(client=lambda: policy_session(policy))

    @classmethod
    def from_config(
        cls, config: dict[str, Any], context: TargetContext | None = None
    ) -> OpenAIChatTarget:
        return cls(cls.clean(config), context)

    def build_messages(self, item: TargetInput) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if self.config["system_prompt"]:
            messages.append({"role": "system", "content": self.config["system_prompt"]})
        if isinstance(item.input, list) and all(
            isinstance(m, dict) and "role" in m for m in item.input
        ):
            messages.extend(item.input)
        else:
            messages.append(
                {
                    "role": "user",
                    "content": render_prompt(self.config["prompt_template"], item),
                }
            )
        return messages

    async def generate(self, item: TargetInput) -> TargetOutput:
        payload: dict[str, Any] = {
            **self.config["extra_body"],
            "model": self.config["model"],
            "messages": self.build_messages(item),
        }
        for key in ("temperature", "max_tokens"):
            if key in self.config:
                payload[key] = self.config[key]
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
        return self.parse_response(response)

    def parse_response(self, response: httpx.Response) -> TargetOutput:
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
                usage=self.usage(data, None, response.status_code),
            )
        output = content if content is not None else message.get("tool_calls")
        return self.usage(data, output, response.status_code)

    def usage(self, data: dict[str, Any], output: Any, status: int) -> TargetOutput:
        """The answer with its tokens and the model the endpoint says answered."""
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        model = data.get("model")
        return TargetOutput(
            output=output,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            http_status=status,
            model=model if isinstance(model, str) and model else self.config["model"],
        )

    async def aclose(self) -> None:
        await self.transport.aclose()

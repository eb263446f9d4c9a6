"""A call to an OpenAI-compatible ``/chat/completions`` endpoint, shared by the
``openai_chat`` target and the ``llm_judge`` scorer.

Both declare the endpoint the same way (``EndpointParams``: base URL, model and
the API key as a project secret), send requests through the operator's network
policy, and classify a failed call the same way (``TargetError`` with its
``ErrorKind``: transient, quota or permanent), so the executor's retry rules
apply to both alike. Sending, the classification of a status and Retry-After
are those of every HTTP target (``http_client``); what is here is what a chat
endpoint adds: its parameters, its key as a Bearer header, and the reading of
its reply. A key the endpoint echoes is replaced where the outcome of an item
or a score is recorded (``runs.secrets.redaction``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import httpx
from pydantic import Field, field_validator, model_validator

from runs.calls.endpoint import EndpointURL, SecretParams
from runs.calls.http_client import Answer, PolicyClient, malformed, status_error
from runs.calls.netpolicy import endpoint_url
from runs.plugins import SecretRef, TargetContext
from runs.plugins.params import EnvName, SecretName, env_name, secret_name
from runs.plugins.targets import TargetOutput

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


# -- the endpoint, declared -------------------------------------------------------

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


# The endpoint of the examples of the kinds that call one.
ENDPOINT_EXAMPLE = {
    "base_url": "https://api.openai.com/v1",
    "model": "gpt-4o-mini",
    "api_key_secret": "OPENAI_API_KEY",
}
# What a chat-completion request is sent with, as ``openai_chat`` and
# ``llm_judge`` declare it (each gives its own default).
SystemPrompt = Annotated[
    str,
    Field(
        description="Sent first, as the system message; empty for none.",
        json_schema_extra={"x-widget": "textarea"},
    ),
]
# The user message, filled from the item (each says with what).
MessageTemplate = Annotated[str, Field(json_schema_extra={"x-widget": "textarea"})]
Temperature = Annotated[
    float | None,
    Field(ge=0, le=2, description="Sampling temperature; empty for the default."),
]
# Each gives its own ceiling and help.
MaxTokens = Annotated[int | None, Field(ge=1)]
# Further JSON fields of every request body (each says which are usual).
ExtraBody = Annotated[dict[str, Any], Field(default_factory=dict)]
ModelName = Annotated[str, Field(description="Model name sent with every request.")]


class EndpointParams(SecretParams):
    """Where an OpenAI-compatible endpoint is, which model, and its key's name."""

    secret = SECRETS[0]
    stored_names = ("api_key",)
    stored_as = "the key"
    noun = "key"

    base_url: EndpointURL = Field(
        title="Base URL",
        description="The API's base URL, before /chat/completions.",
        examples=["https://api.openai.com/v1"],
    )
    model: ModelName
    api_key_secret: SecretName = secret_name("that holds the API key", label="API key")
    api_key_env: EnvName = env_name("that holds the API key", label="API key")

    @field_validator("model")
    @classmethod
    def _model_named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is required")
        return value

    @model_validator(mode="after")
    def _secrets_allowed(self) -> EndpointParams:
        self.check_secret_names()
        return self


# -- the call ------------------------------------------------------------------


class ChatSettings(Protocol):
    """What a request body is built from (``chat_body``)."""

    model: str
    temperature: float | None
    max_tokens: int | None
    extra_body: dict[str, Any]


def chat_body(
    params: ChatSettings, messages: list[dict[str, Any]], **optional: Any
) -> dict[str, Any]:
    """A /chat/completions request body: the configuration's further fields,
    the model and the messages, then temperature, max_tokens and each of
    ``optional`` that is set (not None), in that order."""
    body: dict[str, Any] = {
        **params.extra_body,
        "model": params.model,
        "messages": messages,
    }
    settings = {
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
        **optional,
    }
    body.update((key, value) for key, value in settings.items() if value is not None)
    return body


def with_system(
    system_prompt: str, messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages sent: the system prompt (if any) first, unless the
    conversation opens with its own; a new list, ``messages`` kept as it is."""
    opens_with_own = bool(messages) and messages[0].get("role") == "system"
    if system_prompt and not opens_with_own:
        return [{"role": "system", "content": system_prompt}, *messages]
    return [*messages]


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
    finish_reason: str | None = None


def _int_or_none(value: Any) -> int | None:
    """A token count as the provider reported it, if it is one."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _cost_of(usage: dict[str, Any]) -> float | None:
    # Some gateways (OpenRouter, LiteLLM) report what a call cost.
    cost = usage.get("cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
        return float(cost)
    return None


def bearer_headers(params: EndpointParams, context: TargetContext) -> httpx.Headers:
    """The headers of every request: JSON, and the key as a Bearer token.

    A key named in the configuration but not resolved for the project, or one
    that a header cannot carry, is a ConfigError naming ``api_key_secret``.
    """
    headers = {"Content-Type": "application/json"}
    key = params.credential(context, prefix="Bearer ")
    if key is not None:
        headers["Authorization"] = key
    return httpx.Headers(headers)


class ChatClient:
    """Sends chat-completion requests to one endpoint with one key."""

    def __init__(self, params: EndpointParams, context: TargetContext | None) -> None:
        context = context or TargetContext()
        # Parsed once: httpx would parse a string URL on every request.
        self.url = endpoint_url(params.base_url, "chat/completions")
        self.headers = bearer_headers(params, context)
        self.client = PolicyClient()

    async def post(self, payload: dict[str, Any]) -> Answer:
        """POST the payload; a refusal or a connection failure is a TargetError."""
        return await self.client.send(
            "POST", self.url, headers=self.headers, body=payload
        )

    async def complete(self, payload: dict[str, Any]) -> ChatReply:
        """One request and its answer, or a classified TargetError."""
        return parse_chat_response(await self.post(payload))

    async def aclose(self) -> None:
        await self.client.aclose()


def parse_chat_response(response: Answer) -> ChatReply:
    """The reply of a 200, or a TargetError classified by status (body kept)."""
    if response.status_code >= 400:
        raise status_error(response)
    try:
        data = response.json()
        message = data["choices"][0]["message"]
        content = message.get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise malformed(response, f"{type(exc).__name__}: {exc}") from exc
    usage = _usage_of(data, response.status_code)
    if content is None and not message.get("tool_calls"):
        # A filtered reply still used (and costs) its tokens.
        raise malformed(response, "message has no content", usage=usage)
    return ChatReply(
        data=data,
        message=message,
        content=content,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost,
        model=usage.model or "",
        http_status=response.status_code,
        finish_reason=_finish_reason(data),
    )


def _usage_of(data: dict[str, Any], http_status: int) -> TargetOutput:
    """What a reply says it used: its tokens, their cost, and the model."""
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    model = data.get("model")
    return TargetOutput(
        output=None,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        cost=_cost_of(usage),
        http_status=http_status,
        model=model if isinstance(model, str) else None,
    )


def _finish_reason(data: dict[str, Any]) -> str | None:
    """The first choice's finish reason ("length": cut at max_tokens), if any."""
    reason = data["choices"][0].get("finish_reason")
    return reason[:40] if isinstance(reason, str) and reason else None

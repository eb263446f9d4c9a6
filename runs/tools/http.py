"""An HTTP endpoint as a tool: a URL and a body template filled from the
model's arguments, sent through the network policy, its answer read bounded."""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

import aiohttp
import httpx
from pydantic import Field, model_validator

from runs.calls.chat_client import MissingField, fill_template, template_names
from runs.calls.endpoint import EndpointURL, UrlAuthParams, url_auth
from runs.calls.http_client import error_summary
from runs.calls.netpolicy import current_policy, refusal_in
from runs.calls.sessions import network_error_message, policy_session
from runs.errors import ConfigError
from runs.plugins import FieldError, SecretRef
from runs.plugins.params import (
    ENV_ALLOWED_TO_HOSTS,
    EnvName,
    SecretName,
    env_name,
    secret_name,
)
from runs.plugins.tools import ToolError, ToolPlugin, ToolTimeout, register

SECRETS = (url_auth("sent in the Authorization header (after auth_prefix) to url"),)


class HttpToolParams(UrlAuthParams):
    secret = SECRETS[0]

    timeout_seconds: ToolTimeout = 30.0
    url: EndpointURL = Field(
        title="URL", description="The endpoint each call of the tool is sent to."
    )
    method: Literal["POST", "GET"] = Field(
        "POST",
        description="POST sends the body; GET sends the arguments as the query.",
    )
    body: Any = Field(
        None,
        description=(
            "A JSON template of the request body: its strings may name the "
            "model's arguments ({query}); a string that is exactly one "
            "placeholder keeps the argument's JSON type. Default: the "
            "arguments as they are."
        ),
    )
    parameters: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "The arguments the model gives, as JSON Schema; default: one "
            "required string per placeholder of the body."
        ),
    )
    auth_secret: SecretName = secret_name("sent in the Authorization header")
    auth_env: EnvName = env_name("sent instead", allowed=ENV_ALLOWED_TO_HOSTS)
    auth_prefix: str = Field("Bearer ", max_length=50)
    max_response_bytes: int = Field(
        1_000_000,
        ge=1,
        le=50_000_000,
        description="A longer answer ends the call with an error (read no further).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> HttpToolParams:
        if self.method == "GET" and self.body is not None:
            raise FieldError("body", "a GET request sends no body")
        self.check_secret_names()
        return self


def _placeholders(value: Any) -> list[str]:
    if isinstance(value, str):
        return template_names(value)
    if isinstance(value, dict):
        return [n for item in value.values() for n in _placeholders(item)]
    if isinstance(value, list):
        return [n for item in value for n in _placeholders(item)]
    return []


def fill_body(template: Any, arguments: dict[str, Any]) -> Any:
    """The template with its placeholders filled; MissingField for an
    argument the model did not give."""
    if isinstance(template, str):
        names = template_names(template)
        if len(names) == 1 and template == "{" + names[0] + "}":
            value: Any = arguments
            for part in names[0].split("."):
                if not isinstance(value, dict) or part not in value:
                    raise MissingField(names[0])
                value = value[part]
            return value
        return fill_template(template, arguments)
    if isinstance(template, dict):
        return {k: fill_body(v, arguments) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_body(v, arguments) for v in template]
    return template


@register
class HttpTool(ToolPlugin[HttpToolParams]):
    """Sends the model's arguments to an endpoint; the answer (JSON, else its
    text) is the result. An error status, a refusal by the network policy or
    an answer over ``max_response_bytes`` is an error the model is told."""

    kind: ClassVar[str] = "http"
    label: ClassVar[str] = "HTTP endpoint"
    description: ClassVar[str] = "Calls an HTTP endpoint with the model's arguments."
    example: ClassVar[dict[str, Any]] = {
        "url": "https://search.example.org/v1/search",
        "body": {"q": "{query}"},
        "auth_secret": "SEARCH_KEY",
    }
    secrets: ClassVar[tuple[SecretRef, ...]] = SECRETS

    def __init__(
        self,
        name: str,
        description: str,
        params: HttpToolParams,
        secret: str | None = None,
    ) -> None:
        super().__init__(name, description, params, secret)
        self.policy = current_policy()
        self.session: aiohttp.ClientSession | None = None
        self.headers = {"Content-Type": "application/json"}
        if secret:
            value = params.auth_prefix + secret
            if not value.isascii() or not value.isprintable():
                raise ConfigError(
                    "the secret holds characters a header cannot carry",
                    field="auth_secret",
                )
            self.headers["Authorization"] = value

    def arguments_schema(self) -> dict[str, Any]:
        if self.params.parameters:
            return self.params.parameters
        names = list(dict.fromkeys(_placeholders(self.params.body)))
        return {
            "type": "object",
            "properties": {n.split(".")[0]: {"type": "string"} for n in names},
            "required": sorted({n.split(".")[0] for n in names}),
        }

    async def call(self, arguments: dict[str, Any]) -> Any:
        params = self.params
        try:
            body = (
                arguments if params.body is None else fill_body(params.body, arguments)
            )
        except MissingField as exc:
            raise ToolError(
                f"the argument {exc.name} is missing", error_type="BadArguments"
            ) from None
        if self.session is None:
            self.session = policy_session(self.policy)
        query = None
        data = None
        if params.method == "GET":
            query = {
                k: v if isinstance(v, str) else json.dumps(v)
                for k, v in arguments.items()
            }
        else:
            data = json.dumps(body, ensure_ascii=False).encode()
        try:
            async with self.session.request(
                params.method,
                params.url,
                params=query,
                data=data,
                headers=self.headers,
                allow_redirects=False,
            ) as answer:
                content, cut = await _read_bounded(answer, params.max_response_bytes)
                status = answer.status
        except aiohttp.ClientError as exc:
            refusal = refusal_in(exc)
            if refusal is not None:
                raise ToolError(str(refusal), error_type="NetworkPolicy") from None
            raise ToolError(
                network_error_message(exc), error_type=type(exc).__name__
            ) from None
        if cut:
            raise ToolError(
                f"the answer is longer than {params.max_response_bytes:,} bytes "
                "(max_response_bytes): not read further",
                error_type="AnswerTooLarge",
            )
        if status >= 400:
            raise ToolError(
                error_summary(httpx.Response(status, content=content)),
                error_type=f"HTTP{status}",
            )
        text = content.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()


async def _read_bounded(
    answer: aiohttp.ClientResponse, limit: int
) -> tuple[bytes, bool]:
    """The body up to ``limit`` bytes, and whether there was more (never read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.content.iter_chunked(65_536):
        size += len(chunk)
        if size > limit:
            return b"".join(chunks), True
        chunks.append(chunk)
    return b"".join(chunks), False

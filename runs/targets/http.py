"""An agent or service behind HTTP: a JSON body from the item, the output by a path."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal

import httpx
from pydantic import AfterValidator, Field, field_validator, model_validator

from runs.calls.endpoint import EndpointURL, UrlAuthParams, url_auth
from runs.calls.http_client import Answer, PolicyClient, malformed, status_error
from runs.models import ErrorKind
from runs.plugins import FieldError, SecretRef, TargetContext
from runs.plugins.params import (
    ENV_ALLOWED_TO_HOSTS,
    EnvName,
    SecretName,
    env_name,
    secret_name,
)
from runs.plugins.step_shapes import ShapeError, read_steps
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    register,
)
from runs.targets.templating import (
    ITEM_ROOTS,
    Missing,
    dotted_path,
    item_fields,
    lookup,
    render_json,
    unknown_roots,
)

# RFC 9110's token: what a header name may be.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Set by the transport, or carrying a credential: never a plain header.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "content-type"}
)
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"}
)
# The value a suspended agent reported, quoted at most this long.
VALUE_CHARS = 80
SECRETS = (url_auth("sent in auth_header (after auth_prefix) to url"),)


def _clean_path(value: str) -> str:
    if not value.strip():
        return ""
    return dotted_path(
        value, like="of keys and list indices, like choices.0.message.content"
    )


def _header_problem(name: str, *, not_a_name: str) -> str | None:
    """Why ``name`` cannot be a header the configuration sets, if it cannot."""
    if not _HEADER_NAME.fullmatch(name):
        return not_a_name
    if name.lower() in RESERVED_HEADERS:
        return f"{name} is set by the request itself"
    return None


def _printable_ascii(value: str) -> bool:
    return value.isascii() and all(ch.isprintable() for ch in value)


# A dotted path into the response JSON; empty for none.
ResponsePath = Annotated[str, Field(max_length=500), AfterValidator(_clean_path)]


class HttpParams(UrlAuthParams):
    secret = SECRETS[0]

    url: EndpointURL = Field(
        title="URL",
        description="The endpoint that gets one request per item.",
        examples=["https://agent.example.org/v1/answer"],
    )
    method: Literal["POST", "PUT", "PATCH", "GET", "DELETE"] = Field(
        "POST", description="HTTP method; GET and DELETE send no body."
    )
    body: Any = Field(
        None,
        description=(
            "A JSON template of the request body. Its strings may hold "
            "{input}, {expected}, {external_id}, {index}, {metadata.key} or "
            "{input.key}; a string that is exactly one placeholder keeps the "
            'value\'s JSON type. Default for POST, PUT and PATCH: {"input": '
            '"{input}"}. Write {{ and }} for literal braces.'
        ),
        json_schema_extra={"x-widget": "textarea"},
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Further request headers with fixed values (never a credential: "
            "use auth_secret)."
        ),
    )
    auth_secret: SecretName = secret_name("sent in auth_header", label="Auth")
    auth_env: EnvName = env_name(
        "sent in auth_header", label="Auth", allowed=ENV_ALLOWED_TO_HOSTS
    )
    auth_header: str = Field(
        "Authorization",
        max_length=100,
        title="Auth header",
        description="The header that carries the secret.",
    )
    auth_prefix: str = Field(
        "Bearer ",
        max_length=50,
        title="Auth prefix",
        description='Written before the secret ("Bearer ", or empty).',
    )
    output_path: ResponsePath = Field(
        "",
        title="Output path",
        description=(
            "Where the output is in the response JSON, as a dotted path of "
            "keys and list indices (result.answer, choices.0.message.content); "
            "empty for the whole response."
        ),
    )
    response_type: Literal["json", "text"] = Field(
        "json",
        title="Response type",
        description="json: parse the body and take output_path; text: the body.",
    )
    status_field: ResponsePath = Field(
        "",
        title="Status field",
        description=(
            "Dotted path of the agent's status in the response JSON; with "
            "suspended_values, an answer whose status is one of them is an "
            "error of kind suspended (kept, never retried)."
        ),
    )
    steps_path: ResponsePath = Field(
        "",
        title="Steps path",
        description=(
            "Dotted path of the agent's trajectory in the response JSON: a list "
            "of steps in evalsite's shape or OpenAI-style messages (README, "
            '"Agents that run elsewhere"); kept as the result\'s steps.'
        ),
    )
    trace_headers: bool = Field(
        True,
        title="Trace headers",
        description=(
            "Send the run, item and epoch in X-Evalsite-Run, X-Evalsite-Item "
            "and X-Evalsite-Epoch, and as W3C baggage, so that an instrumented "
            "agent's spans reach this result through /api/v1/otlp/v1/traces."
        ),
    )
    suspended_values: list[str] = Field(
        default_factory=list,
        max_length=50,
        title="Suspended values",
        description='Statuses that mean "waiting for input" or "suspended".',
    )

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("auth_header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        value = value.strip()
        problem = _header_problem(value, not_a_name="must be a header name")
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("auth_prefix")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not _printable_ascii(value):
            raise ValueError("must be printable ASCII")
        return value

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            where = f"headers.{name}"
            problem = _header_problem(name, not_a_name="is not a header name")
            if problem:
                raise FieldError(where, problem)
            if name.lower() in CREDENTIAL_HEADERS:
                raise FieldError(
                    where,
                    "carries a credential: store it as a project secret and "
                    "name it in auth_secret (with auth_header)",
                )
            if not _printable_ascii(value):
                raise FieldError(where, "must be printable ASCII")
        return headers

    @model_validator(mode="after")
    def _consistent(self) -> HttpParams:
        if self.method in ("GET", "DELETE"):
            if self.body is not None:
                raise FieldError("body", f"a {self.method} request sends no body")
        elif self.body is None:
            self.body = {"input": "{input}"}
        if self.body is not None:
            try:
                json.dumps(self.body, allow_nan=False)
            except ValueError as exc:
                raise FieldError("body", f"is not JSON: {exc}") from None
            unknown = unknown_roots(self.body, ITEM_ROOTS)
            if unknown is not None:
                where, path = unknown
                raise FieldError(
                    f"body.{where}" if where else "body",
                    f"{{{path}}} is not an item field (use "
                    f"{', '.join('{' + r + '}' for r in sorted(ITEM_ROOTS))})",
                )
        if self.response_type == "text" and (self.output_path or self.status_field):
            raise FieldError(
                "output_path" if self.output_path else "status_field",
                "needs response_type json",
            )
        if bool(self.status_field) != bool(self.suspended_values):
            raise FieldError(
                "suspended_values" if self.status_field else "status_field",
                "status_field and suspended_values go together",
            )
        if self.auth_header.lower() in {h.lower() for h in self.headers}:
            raise FieldError(
                f"headers.{self.auth_header}", "is the auth_header already"
            )
        self.check_secret_names()
        return self


def trace_headers(run_id: int, index: int, epoch: int) -> dict[str, str]:
    """Where an agent's spans belong: headers it can copy, and W3C baggage,
    which OpenTelemetry's propagators carry on to the services it calls."""
    return {
        "X-Evalsite-Run": str(run_id),
        "X-Evalsite-Item": str(index),
        "X-Evalsite-Epoch": str(epoch),
        "baggage": (
            f"evalsite.run_id={run_id},evalsite.item_index={index},"
            f"evalsite.epoch={epoch}"
        ),
    }


def total[N: (int, float)](values: Iterable[N | None]) -> N | None:
    """The sum of the values given, None when none is."""
    given = [value for value in values if value is not None]
    return sum(given) if given else None


def request_body(template: Any, item: TargetInput) -> Any:
    """The body template rendered for ``item``; None for a request without one."""
    if template is None:
        return None
    return render_json(template, item_fields(item), item, what="body")


@register
class HttpTarget(TargetPlugin[HttpParams]):
    """An agent or service behind HTTP: one request per item, with a JSON body
    templated from the item; the output is read from the response JSON by a
    dotted path. Statuses are classified as for a model endpoint (5xx, 408 and
    429 retried, honouring Retry-After; other 4xx permanent). An answer whose
    status field says the agent is suspended or waiting for input is an error
    of kind suspended, its payload kept: neither a success nor retried.
    """

    kind: ClassVar[str] = "http"
    label: ClassVar[str] = "HTTP endpoint (agent or service)"
    example: ClassVar[dict[str, Any]] = {
        "url": "https://agent.example.org/v1/run",
        "method": "POST",
        "body": {"question": "{input}", "context": "{metadata.context}"},
        "auth_secret": "AGENT_TOKEN",
        "output_path": "result.answer",
        "status_field": "status",
        "suspended_values": ["waiting_for_input", "suspended"],
    }
    secrets: ClassVar[tuple[SecretRef, ...]] = SECRETS

    def __init__(
        self, params: HttpParams, context: TargetContext | None = None
    ) -> None:
        self.params = params
        context = context or TargetContext()
        self.url = httpx.URL(params.url)
        self.method = params.method
        self.body = params.body
        self.output_path = params.output_path
        self.status_field = params.status_field
        self.suspended = frozenset(params.suspended_values)
        headers = {"Accept": "application/json", **params.headers}
        if self.body is not None:
            headers["Content-Type"] = "application/json"
        secret = params.credential(context, prefix=params.auth_prefix)
        if secret is not None:
            headers[params.auth_header] = secret
        self.headers = httpx.Headers(headers)
        self.client = PolicyClient()
        self.run_id = context.run_id

    @classmethod
    def request_for(cls, params: HttpParams, item: TargetInput) -> dict[str, Any]:
        """The request as sent: method, URL, fixed headers and the body
        rendered for ``item``. The secret's header is named, its value never."""
        headers = dict(params.headers)
        if params.auth_secret or params.auth_env:
            source = params.auth_secret or f"${params.auth_env}"
            headers[params.auth_header] = f"{params.auth_prefix}<secret {source}>"
        return {
            "method": params.method,
            "url": params.url,
            "headers": headers,
            "body": request_body(params.body, item),
        }

    async def generate(self, item: TargetInput) -> TargetOutput:
        body = request_body(self.body, item)
        headers = self.headers
        if self.params.trace_headers and self.run_id is not None:
            headers = httpx.Headers(
                {**headers, **trace_headers(self.run_id, item.index, item.epoch)}
            )
        response = await self.client.send(
            self.method, self.url, headers=headers, body=body
        )
        return self.parse_response(response)

    def parse_response(self, response: Answer) -> TargetOutput:
        if response.status_code >= 300:
            raise status_error(response)
        # Parsed as received: an agent that echoes its request headers has the
        # secret replaced, in whatever form, where the item's outcome is
        # recorded (runs.secrets.redaction), before it is scored or stored.
        text = response.text
        if self.params.response_type == "text":
            return TargetOutput(output=text, http_status=response.status_code)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise malformed(response, f"the body is not JSON: {exc}") from None
        if self.status_field:
            self.check_status(data, response, text)
        if not self.output_path:
            return self.with_steps(
                TargetOutput(output=data, http_status=response.status_code),
                data,
                response,
            )
        try:
            output = lookup(data, self.output_path)
        except Missing as exc:
            raise malformed(
                response, f"the response has no {self.output_path} ({exc.explain()})"
            ) from None
        if output is None:
            raise malformed(response, f"the response's {self.output_path} is null")
        return self.with_steps(
            TargetOutput(output=output, http_status=response.status_code),
            data,
            response,
        )

    def with_steps(
        self, answer: TargetOutput, data: Any, response: Answer
    ) -> TargetOutput:
        """The answer with the trajectory at ``steps_path`` and its tokens (the
        executor prices its model calls, keeping the costs the agent gave)."""
        if not self.params.steps_path:
            return answer
        path = self.params.steps_path
        try:
            steps = read_steps(lookup(data, path))
        except Missing as exc:
            raise malformed(
                response, f"the response has no {path} ({exc.explain()})"
            ) from None
        except ShapeError as exc:
            raise malformed(response, f"the response's {path}{exc}") from None
        answer.steps = steps
        answer.prompt_tokens = total(step.prompt_tokens for step in steps)
        answer.completion_tokens = total(step.completion_tokens for step in steps)
        return answer

    def check_status(self, data: Any, response: Answer, text: str) -> None:
        try:
            status = lookup(data, self.status_field)
        except Missing:
            return  # no status reported: an ordinary answer
        if isinstance(status, str) and status in self.suspended:
            shown = status if len(status) <= VALUE_CHARS else status[:VALUE_CHARS]
            raise TargetError(
                f"the agent is suspended: {self.status_field} is {shown!r}",
                kind=ErrorKind.SUSPENDED,
                http_status=response.status_code,
                raw_body=text,
                error_type="Suspended",
            )

    async def aclose(self) -> None:
        await self.client.aclose()

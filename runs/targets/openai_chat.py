"""Any OpenAI-compatible ``/chat/completions`` endpoint, over httpx."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx
from pydantic import Field

from runs.models import ErrorKind
from runs.plugins import Plugin
from runs.secrets import SecretRef, TargetContext
from runs.targets.base import (
    TargetError,
    TargetInput,
    TargetOutput,
    register,
)
from runs.targets.chat_client import (
    ERROR_BODY_LIMIT,
    SECRETS,
    ChatClient,
    EndpointParams,
    MissingField,
    classify_status,
    fill_template,
    parse_chat_response,
    parse_retry_after,
)

# Shared with the llm_judge scorer (``chat_client``); named here as before.
__all__ = [
    "ERROR_BODY_LIMIT",
    "OpenAIChatTarget",
    "classify_status",
    "parse_retry_after",
    "render_prompt",
]


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
    try:
        return fill_template(template, fields)
    except MissingField as exc:
        raise TargetError(
            f"prompt template names {{{exc.name}}}, which item "
            f"{item.external_id!r} does not have",
            kind=ErrorKind.PERMANENT,
            error_type="TemplateError",
        ) from None


class OpenAIChatParams(EndpointParams):
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
        self.client = ChatClient(config, context)
        self.transport = self.client.transport

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
        return self.parse_response(await self.client.post(payload))

    def parse_response(self, response: httpx.Response) -> TargetOutput:
        reply = parse_chat_response(response)
        content = reply.content
        return TargetOutput(
            output=content if content is not None else reply.message.get("tool_calls"),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            http_status=reply.http_status,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

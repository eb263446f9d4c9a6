"""Any OpenAI-compatible ``/chat/completions`` endpoint, over httpx."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from runs.calls.chat_client import (
    ENDPOINT_EXAMPLE,
    SECRETS,
    ChatClient,
    EndpointParams,
    ExtraBody,
    MaxTokens,
    MessageTemplate,
    ModelName,
    SystemPrompt,
    Temperature,
    chat_body,
    parse_chat_response,
    with_system,
)
from runs.calls.http_client import (
    ERROR_BODY_LIMIT,
    Answer,
)
from runs.calls.retry import classify_status, parse_retry_after
from runs.models import ErrorKind
from runs.plugins import FieldError, Params, SecretRef, TargetContext
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    register,
)
from runs.targets.templating import item_fields, render_text

__all__ = [
    "ERROR_BODY_LIMIT",
    "OpenAIChatTarget",
    "classify_status",
    "parse_retry_after",
    "render_prompt",
]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
TOOL_CHOICE_WORDS = frozenset({"none", "auto", "required"})
RESPONSE_FORMAT_TYPES = frozenset({"text", "json_object", "json_schema"})


def render_prompt(template: str, item: TargetInput) -> str:
    """Fill ``{input}``, ``{expected}``, ``{id}`` and ``{metadata.key}`` from the item.

    The keys of an input that is an object may be named directly
    (``{question}``). Only dictionary and list look-ups are done, never
    attribute access, so a template cannot reach into Python objects.
    """
    if template == "{input}" and isinstance(item.input, str):
        return item.input  # the default template: nothing to look up
    fields = item_fields(item)
    if isinstance(item.input, dict):
        fields = {**item.input, **fields}
    return render_text(template, fields, item, what="prompt template")


def check_messages(messages: Any, item: TargetInput) -> list[dict[str, Any]]:
    """A conversation from an item's input, or a permanent error naming the part."""

    def bad(where: str, message: str) -> TargetError:
        return TargetError(
            f"item {item.external_id!r}: input{where} {message}",
            kind=ErrorKind.PERMANENT,
            error_type="InvalidMessages",
        )

    if not messages:
        raise bad("", "is an empty list of messages")
    for number, message in enumerate(messages):
        where = f"[{number}]"
        if not isinstance(message, dict):
            raise bad(where, "must be an object with a role and a content")
        role = message.get("role")
        if role not in ROLES:
            raise bad(
                f"{where}.role",
                f"must be one of {', '.join(sorted(ROLES))}, not {role!r}",
            )
        content = message.get("content")
        if content is None:
            if not (role == "assistant" and message.get("tool_calls")):
                raise bad(f"{where}.content", "is missing")
        elif isinstance(content, list):
            if not all(isinstance(part, dict) and "type" in part for part in content):
                raise bad(
                    f"{where}.content",
                    "must be a string or a list of parts with a type",
                )
        elif not isinstance(content, str):
            raise bad(f"{where}.content", "must be a string or a list of parts")
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise bad(f"{where}.tool_call_id", "is required in a tool message")
    return messages


def is_conversation(value: Any) -> bool:
    """An input that is a list holding a message is sent as a conversation."""
    return isinstance(value, list) and any(
        isinstance(m, dict) and "role" in m for m in value
    )


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ChatPrompt(Params):
    """What a target sends an item to a chat model with: the model, the first
    messages (``chat_messages``) and the request's settings (``chat_body``)."""

    model: ModelName
    system_prompt: SystemPrompt = ""
    prompt_template: MessageTemplate = Field(
        "{input}",
        description=(
            "The user message (an agent's first): {input}, {expected}, {id} and "
            "{metadata.key} are filled from the item. An input that is a list of "
            "messages is sent as it is."
        ),
    )
    temperature: Temperature = None
    max_tokens: MaxTokens = Field(
        None, le=10_000_000, description="Most tokens one model reply may have."
    )
    extra_body: ExtraBody = Field(
        description="Further JSON fields of every request body (top_p, seed, ...)."
    )


# The endpoint's fields first (pydantic orders fields from the last base).
class OpenAIChatParams(ChatPrompt, EndpointParams):
    response_format: dict[str, Any] | None = Field(
        None,
        title="Response format",
        description=(
            'JSON mode, sent as it is: {"type": "json_object"}, or {"type": '
            '"json_schema", "json_schema": {"name": ..., "schema": {...}}}.'
        ),
    )
    tools: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=128,
        description=(
            'Tool definitions, sent as they are: [{"type": "function", '
            '"function": {"name": ..., "parameters": {...}}}]. Tool calls in '
            'a reply make the output {"content": ..., "tool_calls": [...]}.'
        ),
    )
    tool_choice: str | dict[str, Any] | None = Field(
        None,
        title="Tool choice",
        description=(
            'none, auto, required, or {"type": "function", "function": '
            '{"name": ...}} naming one of the tools.'
        ),
    )
    keep_raw_response: bool = Field(
        True,
        title="Keep raw response",
        description=(
            "Keep each answer's response body on its attempt (up to 20,000 characters)."
        ),
    )

    @field_validator("response_format")
    @classmethod
    def _response_format(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        kind = value.get("type")
        if kind not in RESPONSE_FORMAT_TYPES:
            raise FieldError(
                "response_format.type",
                f"must be one of {', '.join(sorted(RESPONSE_FORMAT_TYPES))}, "
                f"not {kind!r}",
            )
        if kind == "json_schema":
            spec = value.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise FieldError(
                    "response_format.json_schema",
                    "must be an object with a name (and a schema)",
                )
            if "schema" in spec and not isinstance(spec["schema"], dict):
                raise FieldError(
                    "response_format.json_schema.schema", "must be an object"
                )
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names: set[str] = set()
        for number, tool in enumerate(tools):
            where = f"tools[{number}]"
            if tool.get("type") != "function":
                raise FieldError(f"{where}.type", 'must be "function"')
            function = tool.get("function")
            if not isinstance(function, dict):
                raise FieldError(f"{where}.function", "must be an object")
            name = function.get("name")
            if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
                raise FieldError(
                    f"{where}.function.name",
                    "must be 1 to 64 letters, digits, _ or -",
                )
            if name in names:
                raise FieldError(f"{where}.function.name", f"{name!r} is repeated")
            names.add(name)
            if "parameters" in function and not isinstance(
                function["parameters"], dict
            ):
                raise FieldError(
                    f"{where}.function.parameters", "must be a JSON Schema object"
                )
        return tools

    @model_validator(mode="after")
    def _tool_choice(self) -> OpenAIChatParams:
        choice = self.tool_choice
        if choice is None:
            return self
        if not self.tools:
            raise FieldError("tool_choice", "needs tools")
        if isinstance(choice, str):
            if choice not in TOOL_CHOICE_WORDS:
                raise FieldError(
                    "tool_choice",
                    f"must be none, auto, required or an object, not {choice!r}",
                )
            return self
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        declared = {tool["function"]["name"] for tool in self.tools}
        if choice.get("type") != "function" or name not in declared:
            raise FieldError(
                "tool_choice",
                'must be {"type": "function", "function": {"name": ...}} naming '
                f"one of the tools ({', '.join(sorted(declared))})",
            )
        return self


def chat_messages(params: ChatPrompt, item: TargetInput) -> list[dict[str, Any]]:
    """The messages sent for ``item``: the system prompt, then the rendered
    prompt template, or the item's own conversation."""
    if is_conversation(item.input):
        opening = check_messages(item.input, item)
    else:
        user = render_prompt(params.prompt_template, item)
        opening = [{"role": "user", "content": user}]
    return with_system(params.system_prompt, opening)


def chat_payload(params: OpenAIChatParams, item: TargetInput) -> dict[str, Any]:
    """The /chat/completions request body for ``item``."""
    payload = chat_body(
        params,
        chat_messages(params, item),
        response_format=params.response_format,
        tool_choice=params.tool_choice,
    )
    if params.tools:
        payload["tools"] = params.tools
    return payload


@register
class OpenAIChatTarget(TargetPlugin[OpenAIChatParams]):
    """Any OpenAI-compatible /chat/completions endpoint (OpenAI, vLLM, Ollama, ...).

    An item whose input is a list of messages is sent as that conversation
    (after the system prompt, unless the conversation has its own); JSON mode
    and tools are passed through. A reply with tool calls gives the output
    ``{"content": ..., "tool_calls": [...]}``; any other reply, its content.
    """

    kind: ClassVar[str] = "openai_chat"
    label: ClassVar[str] = "OpenAI-compatible chat endpoint"
    example: ClassVar[dict[str, Any]] = {
        **ENDPOINT_EXAMPLE,
        "system_prompt": "",
        "prompt_template": "{input}",
        "temperature": 0,
        "max_tokens": 256,
    }
    secrets: ClassVar[tuple[SecretRef, ...]] = SECRETS

    def __init__(
        self, params: OpenAIChatParams, context: TargetContext | None = None
    ) -> None:
        self.params = params
        self.client = ChatClient(params, context)

    @classmethod
    def request_for(
        cls, params: OpenAIChatParams, item: TargetInput
    ) -> dict[str, Any] | None:
        return chat_payload(params, item)

    def build_payload(self, item: TargetInput) -> dict[str, Any]:
        return chat_payload(self.params, item)

    async def generate(self, item: TargetInput) -> TargetOutput:
        payload = self.build_payload(item)
        return self.parse_response(await self.client.post(payload))

    def parse_response(self, response: Answer) -> TargetOutput:
        reply = parse_chat_response(response)
        tool_calls = reply.message.get("tool_calls")
        keep_raw = self.params.keep_raw_response
        return TargetOutput(
            output=(
                {"content": reply.content, "tool_calls": tool_calls}
                if tool_calls
                else reply.content
            ),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost=reply.cost,
            http_status=reply.http_status,
            # The model the endpoint says answered prices the tokens.
            model=reply.model or self.params.model,
            finish_reason=reply.finish_reason,
            # Whole: the executor cuts it once any secret in it is replaced
            # (cut first, a key across the cut would keep its first part).
            raw_body=response.text if keep_raw else None,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

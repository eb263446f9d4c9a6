"""A tool-using agent: a loop of model calls and tool calls against any
OpenAI-compatible endpoint, every step kept.

The item's input (a text, or a list of messages) goes to the model with the
tools' schemas; the tool calls it asks for are executed (several at once
when it asks for several), their results go back as ``tool`` messages, until
it answers without a tool call (or calls a ``final_answer`` tool) or a budget
is reached: ``max_steps`` model calls, ``max_tool_calls``, ``max_seconds``,
``max_tokens_total``. A budget ends the item with an error of type
``budget``, its steps kept. Each model call is paced by the run's request
rate and retried, under its own timeout, only when its failure is transient
(the call policy, ``runs.calls.retry``), by the run's retry rules; a call
that fails for good ends the item, which the executor does not run again
(retries of retries would multiply its calls); a cancel reaches whichever
call or tool is awaited. A tool that fails, hangs past its timeout, or is called
with arguments that are not JSON ends its step with an error the model is
told; it never ends the run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field, model_validator

from runs.calls.chat_client import (
    ENDPOINT_EXAMPLE,
    SECRETS,
    ChatClient,
    ChatReply,
    EndpointParams,
    chat_body,
)
from runs.calls.limits import attempt_timeout, call_rate
from runs.calls.retry import (
    Backoff,
    GaveUp,
    RetryPolicy,
    RetryTokens,
    run_retries,
    with_retries,
)
from runs.errors import ConfigError
from runs.models import ErrorKind
from runs.plugins import FieldError, SecretRef, TargetContext
from runs.plugins.steps import Step
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    register,
)
from runs.plugins.tools import TOOL_NAME, TOOLS, ToolError, ToolPlugin, build_tool
from runs.targets.openai_chat import ChatPrompt, chat_messages
from runs.tools import TOOL_KINDS  # noqa: F401  (the tool kinds register)

BUDGET = "budget"
# The tools and budget of the examples of the kinds that run the loop.
LOOP_EXAMPLE: dict[str, Any] = {
    "tools": [
        {
            "kind": "python",
            "name": "add",
            "params": {"callable": "runs.tools.examples.add"},
        },
        {"kind": "final_answer", "name": "final_answer"},
    ],
    "max_steps": 10,
}
# The share of the run's per-attempt timeout the loop may take.
TIMEOUT_SHARE = 0.95


TOOL_KEYS = frozenset({"kind", "name", "description", "params"})
DESCRIPTION_CHARS = 2000


def clean_tool(spec: Any, where: str) -> dict[str, Any]:
    """One tool of an agent, its kind's parameters validated (with their
    defaults), or FieldError naming the part."""
    if not isinstance(spec, dict):
        raise FieldError(where, 'must be an object {"kind", "name", "params"}')
    unknown = sorted(set(spec) - TOOL_KEYS)
    if unknown:
        raise FieldError(f"{where}.{unknown[0]}", "is not a key of a tool")
    name = spec.get("name")
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise FieldError(f"{where}.name", "must be 1 to 64 letters, digits, _ or -")
    description = spec.get("description", "")
    if not isinstance(description, str) or len(description) > DESCRIPTION_CHARS:
        raise FieldError(
            f"{where}.description", f"must be text of at most {DESCRIPTION_CHARS}"
        )
    try:
        cls = TOOLS.lookup(spec.get("kind"), field=f"{where}.kind")
        params = cls.clean(spec.get("params") or {}, path=f"{where}.params")
    except ConfigError as exc:
        raise FieldError(exc.field or where, exc.message) from None
    return {
        "kind": cls.kind,
        "name": name,
        "description": description,
        "params": params,
    }


class LoopParams(ChatPrompt):
    """What an agent's loop is run by, whatever answers its model calls: its
    model and first messages (a ``ChatPrompt``), its tools and budgets."""

    tools: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=64,
        description=(
            'The tools, each {"kind": ..., "name": ..., "params": {...}}; '
            "kinds: GET /api/v1/tools."
        ),
    )
    max_steps: int = Field(
        20, ge=1, le=10_000, description="Most model calls the loop makes."
    )
    max_tool_calls: int = Field(
        50, ge=0, le=100_000, description="Most tool calls the loop makes."
    )
    max_seconds: float = Field(
        300.0,
        gt=0,
        le=86_400,
        description="Longest the loop may take (keep it under the run's timeout).",
    )
    max_tokens_total: int | None = Field(
        None, ge=1, description="Most tokens (prompt and completion) of all calls."
    )
    parallel_tool_calls: int = Field(
        4, ge=1, le=64, description="Tool calls of one reply executed at once."
    )
    tool_result_chars: int = Field(
        20_000,
        ge=100,
        le=1_000_000,
        description="A tool's result is sent to the model cut to this many characters.",
    )
    call_timeout_seconds: float = Field(
        120.0, gt=0, le=3600, description="Timeout of each model call."
    )
    call_max_attempts: int = Field(
        3,
        ge=1,
        le=10,
        description=(
            "Attempts of a model call that fails transiently (in a run, at most "
            "its max attempts); the item is not run again after them."
        ),
    )

    @model_validator(mode="after")
    def _tools_declared(self) -> LoopParams:
        names: set[str] = set()
        tools = []
        for number, spec in enumerate(self.tools):
            tool = clean_tool(spec, f"tools[{number}]")
            if tool["name"] in names:
                raise FieldError(
                    f"tools[{number}].name", f"{tool['name']!r} is repeated"
                )
            names.add(tool["name"])
            tools.append(tool)
        self.tools = tools
        return self


# An agent's loop against an OpenAI-compatible endpoint, the endpoint's fields
# first (pydantic orders fields from the last base).
class AgentParams(LoopParams, EndpointParams):
    pass


def budget_error(message: str, steps: list[Step], usage: TargetOutput) -> TargetError:
    usage.steps = steps
    return TargetError(
        f"budget: {message}",
        kind=ErrorKind.PERMANENT,
        error_type=BUDGET,
        usage=usage,
    )


def timed_out(seconds: float) -> TargetError:
    return TargetError(
        f"model call exceeded {seconds:g} s",
        kind=ErrorKind.TIMEOUT,
        error_type="Timeout",
    )


def _plus(total: int | None, value: int | None) -> int | None:
    return value if total is None else total if value is None else total + value


class Loop:
    """One item's trajectory under way: its messages, steps and usage."""

    def __init__(self, params: LoopParams, messages: list[dict[str, Any]]) -> None:
        self.params = params
        self.messages = messages
        self.sent = 0  # messages already sent with an earlier model call
        self.steps: list[Step] = []
        self.usage = TargetOutput(output=None, model=params.model)
        self.model_calls = 0
        self.tool_calls = 0

    def budget(self, message: str) -> TargetError:
        return budget_error(message, self.steps, self.usage)

    def add_reply(self, reply: ChatReply, latency_ms: float) -> None:
        new = self.messages[self.sent :]
        self.sent = len(self.messages)
        usage = self.usage
        usage.prompt_tokens = _plus(usage.prompt_tokens, reply.prompt_tokens)
        usage.completion_tokens = _plus(
            usage.completion_tokens, reply.completion_tokens
        )
        usage.model = reply.model or self.params.model
        usage.finish_reason = reply.finish_reason
        self.steps.append(
            Step(
                kind="model",
                name=reply.model or self.params.model,
                arguments=new,
                output=reply.message,
                latency_ms=latency_ms,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                cost=reply.cost,
            )
        )

    def tokens(self) -> int:
        return (self.usage.prompt_tokens or 0) + (self.usage.completion_tokens or 0)


class ToolLoop[P: LoopParams](TargetPlugin[P]):
    """The tool-calling loop of an agent, whatever answers its model calls
    (``complete``): the tools the model asks for are executed and their
    results sent back until it answers or a budget ends the item (an error
    of type budget, its steps kept)."""

    def __init__(self, params: P, context: TargetContext | None = None) -> None:
        self.params = params
        context = context or TargetContext()
        self.tools: dict[str, ToolPlugin[Any]] = {
            spec["name"]: build_tool(
                spec, context=context, key=tool_secret_key(spec["name"])
            )
            for spec in params.tools
        }
        self.schemas = [tool.schema() for tool in self.tools.values()]
        self.retry_policy = RetryPolicy(
            params.call_max_attempts, params.call_timeout_seconds, Backoff()
        )

    async def complete(self, payload: dict[str, Any]) -> ChatReply:
        """The model's answer to one request, or a classified TargetError."""
        raise NotImplementedError

    @classmethod
    def secret_scope(
        cls, config: dict[str, Any]
    ) -> tuple[Sequence[SecretRef], dict[str, Any], str]:
        """Its own secrets (an endpoint's key), and each tool's under its path
        (``tools[0].params.auth_secret``) in a flat view of the configuration."""
        refs = list(cls.secrets)
        flat = dict(config)
        for number, spec in enumerate(config.get("tools") or []):
            tool = TOOLS.get(spec.get("kind", "")) if isinstance(spec, dict) else None
            ref = tool.secret_ref() if tool is not None else None
            if ref is None:
                continue
            where = f"tools[{number}].params"
            params = spec.get("params") or {}
            fields = {
                name: f"{where}.{name}" if name else None
                for name in (ref.secret_field, ref.env_field, ref.url_field)
            }
            for name, path in fields.items():
                if name and path:
                    flat[path] = params.get(name, "")
            refs.append(
                SecretRef(
                    key=tool_secret_key(spec.get("name", "")),
                    secret_field=f"{where}.{ref.secret_field}",
                    env_field=fields.get(ref.env_field or ""),
                    url_field=fields.get(ref.url_field or ""),
                    help=ref.help,
                )
            )
        return refs, flat, ""

    @classmethod
    def request_for(cls, params: P, item: TargetInput) -> dict[str, Any]:
        tools = [build_tool(spec).schema() for spec in params.tools]
        return {**chat_body(params, chat_messages(params, item)), "tools": tools}

    async def prepare(self) -> None:
        for tool in self.tools.values():
            await tool.prepare()

    async def aclose(self) -> None:
        for tool in self.tools.values():
            await tool.aclose()

    # -- the loop ------------------------------------------------------------

    async def generate(self, item: TargetInput) -> TargetOutput:
        params = self.params
        loop = Loop(params, chat_messages(params, item))
        seconds, which = params.max_seconds, f"max_seconds ({params.max_seconds:g} s)"
        run_timeout = attempt_timeout()
        if run_timeout is not None and run_timeout * TIMEOUT_SHARE < seconds:
            # Ended here, before the run's timeout cancels it, its steps are kept.
            seconds = run_timeout * TIMEOUT_SHARE
            which = f"the run's timeout ({run_timeout:g} s an attempt)"
        try:
            async with asyncio.timeout(seconds):
                return await self.run_loop(loop)
        except TimeoutError:
            raise loop.budget(f"{which} passed without a final answer") from None

    async def run_loop(self, loop: Loop) -> TargetOutput:
        params = self.params
        while True:
            if loop.model_calls >= params.max_steps:
                raise loop.budget(
                    f"max_steps ({params.max_steps} model calls) reached without "
                    "a final answer"
                )
            reply = await self.ask(loop)
            tool_calls = reply.message.get("tool_calls") or []
            if (
                params.max_tokens_total is not None
                and loop.tokens() > params.max_tokens_total
            ):
                raise loop.budget(
                    f"max_tokens_total ({params.max_tokens_total:,}) exceeded: "
                    f"{loop.tokens():,} tokens used"
                )
            if not isinstance(tool_calls, list) or not tool_calls:
                return self.answer(loop, reply.content)
            if loop.tool_calls + len(tool_calls) > params.max_tool_calls:
                raise loop.budget(
                    f"max_tool_calls ({params.max_tool_calls}) reached: the model "
                    f"asked for {len(tool_calls)} more after {loop.tool_calls}"
                )
            loop.messages.append(
                {
                    "role": "assistant",
                    "content": reply.content,
                    "tool_calls": tool_calls,
                }
            )
            # The reply is the model step's output: not sent again as news.
            loop.sent = len(loop.messages)
            final = await self.call_tools(loop, tool_calls)
            if final is not None:
                return self.answer(loop, final[0])

    def answer(self, loop: Loop, output: Any) -> TargetOutput:
        usage = loop.usage
        usage.output = output
        usage.steps = loop.steps
        return usage

    async def ask(self, loop: Loop) -> ChatReply:
        """One model call, paced and retried by the call policy."""
        payload = {
            **chat_body(self.params, loop.messages),
            "tools": self.schemas,
        }
        rate = call_rate()
        # The executor paced the first call of the attempt; a retry is paced
        # as a call (with_retries).
        if rate is not None and loop.model_calls > 0:
            await rate.acquire()
        loop.model_calls += 1
        began = time.monotonic()
        policy, budget = self.call_policy()
        try:
            reply = await with_retries(
                lambda: self.complete(payload),
                policy=policy,
                failures=TargetError,
                timed_out=timed_out,
                budget=budget,
                pace=rate,
            )
        except GaveUp as gave_up:
            failure: TargetError = gave_up.failure
            failure.call_attempts = gave_up.attempts
            loop.steps.append(
                Step(
                    kind="model",
                    name=self.params.model,
                    arguments=loop.messages[loop.sent :],
                    error=failure.message,
                    error_type=failure.error_type,
                    latency_ms=_since(began),
                )
            )
            loop.usage.steps = loop.steps
            failure.usage = loop.usage
            raise failure from None
        loop.add_reply(reply, _since(began))
        return reply

    def call_policy(self) -> tuple[RetryPolicy, RetryTokens | None]:
        """How a model call is retried: by ``call_max_attempts`` and the
        call's timeout, and in a run by its rules too (at most its attempts
        an item, its back-off, from its retry budget): the item is not run
        again after them (``TargetError.call_attempts``)."""
        run = run_retries()
        if run is None:
            return self.retry_policy, None
        attempts = min(self.params.call_max_attempts, run.max_attempts)
        policy = RetryPolicy(attempts, self.params.call_timeout_seconds, run.backoff)
        return policy, run.budget

    async def call_tools(self, loop: Loop, tool_calls: list[Any]) -> tuple[Any] | None:
        """Execute the calls of one reply (``parallel_tool_calls`` at once);
        their steps and ``tool`` messages in the order asked. The answer of a
        final tool that succeeded, if one was called."""
        turns = asyncio.Semaphore(self.params.parallel_tool_calls)

        async def one(call: Any) -> tuple[Step, bool]:
            async with turns:
                return await self.call_tool(call)

        done = await asyncio.gather(*(one(call) for call in tool_calls))
        final: tuple[Any] | None = None
        for step, is_final in done:
            loop.tool_calls += 1
            loop.steps.append(step)
            loop.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": step.call_id,
                    "content": self.tool_message(step),
                }
            )
            if is_final and not step.error and final is None:
                final = (step.output,)
        return final

    def tool_message(self, step: Step) -> str:
        if step.error:
            text = f"error: {step.error}"
        elif isinstance(step.output, str):
            text = step.output
        else:
            text = json.dumps(step.output, ensure_ascii=False, default=str)
        limit = self.params.tool_result_chars
        return text if len(text) <= limit else text[:limit] + " …(cut)"

    async def call_tool(self, call: Any) -> tuple[Step, bool]:
        """One tool call as a step; an error the model is told, never raised."""
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        name = str(function.get("name") or "")
        call_id = str(call.get("id") or "") if isinstance(call, dict) else ""
        raw = function.get("arguments")
        step = Step(kind="tool", name=name or "?", arguments=raw, call_id=call_id)
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools))
            step.error = f"there is no tool {name!r} (tools: {known})"
            step.error_type = "UnknownTool"
            return step, False
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            step.error = f"the arguments are not valid JSON: {exc}"
            step.error_type = "InvalidArguments"
            return step, False
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            step.error = "the arguments must be a JSON object"
            step.error_type = "InvalidArguments"
            return step, False
        step.arguments = arguments
        began = time.monotonic()
        try:
            async with asyncio.timeout(tool.timeout):
                step.output = await tool.call(arguments)
        except TimeoutError:
            step.error = f"the tool did not answer within {tool.timeout:g} s"
            step.error_type = "ToolTimeout"
        except ToolError as exc:
            step.error, step.error_type = exc.message, exc.error_type
        except Exception as exc:  # a tool's bug must not end the run: recorded
            step.error = f"{type(exc).__name__}: {exc}"
            step.error_type = type(exc).__name__
        step.latency_ms = _since(began)
        return step, tool.final


@register
class AgentTarget(ToolLoop[AgentParams]):
    """A tool-calling loop against any OpenAI-compatible endpoint: the tools
    it asks for are executed and their results sent back until it answers
    or a budget ends the item (an error of type budget, its steps kept)."""

    kind: ClassVar[str] = "agent"
    label: ClassVar[str] = "Agent (tool-calling loop)"
    example: ClassVar[dict[str, Any]] = {
        **ENDPOINT_EXAMPLE,
        "system_prompt": "Use the tools, then answer.",
        **LOOP_EXAMPLE,
    }
    secrets: ClassVar[tuple[SecretRef, ...]] = SECRETS

    def __init__(
        self, params: AgentParams, context: TargetContext | None = None
    ) -> None:
        super().__init__(params, context)
        self.client = ChatClient(params, context)

    async def complete(self, payload: dict[str, Any]) -> ChatReply:
        return await self.client.complete(payload)

    async def aclose(self) -> None:
        await self.client.aclose()
        await super().aclose()


def tool_secret_key(name: str) -> str:
    """Where a tool's secret is in the agent's context."""
    return f"tool:{name}"


def _since(began: float) -> float:
    return round((time.monotonic() - began) * 1000, 3)

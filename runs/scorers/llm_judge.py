from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, TypedDict

from pydantic import Field, field_validator, model_validator

from runs.calls.chat_client import (
    ENDPOINT_EXAMPLE,
    SECRETS,
    ChatClient,
    ChatReply,
    EndpointParams,
    ExtraBody,
    MaxTokens,
    MessageTemplate,
    MissingField,
    SystemPrompt,
    Temperature,
    chat_body,
    fill_template,
    template_names,
    with_system,
)
from runs.calls.pricing import cost_of
from runs.calls.retry import Backoff, GaveUp, RetryPolicy, with_retries
from runs.models import ErrorKind
from runs.plugins import (
    BackoffBaseSeconds,
    BackoffCapSeconds,
    FieldError,
    JsonKey,
    SecretRef,
    TargetContext,
)
from runs.plugins.scorers import (
    ScoreOutcome,
    ScorerError,
    ScorerPlugin,
    as_text,
    register,
)
from runs.plugins.steps import Step
from runs.plugins.targets import TargetError, TargetInput
from runs.scorers.judge_replies import (
    Form,
    FormatRefused,
    StructuredReply,
    forms_to_try,
    is_number,
    json_object,
    read_pass_fail,
    read_score,
    refuses_format,
    remember,
    response_format,
    structured_instructions,
    verdict_schema,
    word_verdict,
)
from runs.scorers.trajectory import trajectory_text

Format = Literal["pass_fail", "scale_1_5", "scale_0_10", "json"]
# The fields a template may name; {metadata.key} and {input.key} reach inside.
TEMPLATE_FIELDS = (
    "input", "expected", "output", "id", "index", "metadata", "format", "trajectory",
)  # fmt: skip
# A reply is kept whole as the reason up to this many characters.
REASON_LIMIT = 100_000
INSTRUCTIONS: dict[str, str] = {
    "pass_fail": 'End your reply with a last line "Verdict: PASS" or "Verdict: FAIL".',
    "scale_1_5": (
        'End your reply with a last line "Score: N", N a whole number from 1 '
        "to 5 (5 is best)."
    ),
    "scale_0_10": (
        'End your reply with a last line "Score: N", N a whole number from 0 '
        "to 10 (10 is best)."
    ),
}
SCALES = {"scale_1_5": (1.0, 5.0), "scale_0_10": (0.0, 10.0)}
DEFAULT_THRESHOLDS = {"scale_1_5": 4.0, "scale_0_10": 7.0, "json": 0.5}
# The judge's call limit was named ``concurrency``, like the run option that
# limits the target's calls; configurations stored under that name still load.
FORMER_CALL_LIMIT = "concurrency"
CALL_LIMIT_RENAMED = (
    "llm_judge: the parameter 'concurrency' is deprecated and read as "
    "'max_parallel_calls'; name it max_parallel_calls"
)
DEFAULT_TEMPLATE = """Grade the answer below.

Question:
{input}

Reference answer:
{expected}

Answer:
{output}

{format}"""


class Usage(TypedDict):
    """What a judge's call used, kept with its score or its error."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    model: str


class LLMJudgeParams(EndpointParams):
    system_prompt: SystemPrompt = (
        "You are a careful, strict grader. Judge only what is asked."
    )
    prompt_template: MessageTemplate = Field(
        DEFAULT_TEMPLATE,
        description=(
            "The rubric, sent as the user message. {output} is the output to "
            "judge; {input}, {expected}, {id}, {index} and {metadata.key} (or "
            "{input.key}) come from the item; {format} says how to answer in "
            "the chosen verdict format; {trajectory} is the result's steps, one "
            "a line, cut to trajectory_chars."
        ),
    )
    trajectory_chars: int = Field(
        20_000,
        ge=200,
        le=1_000_000,
        description=(
            "{trajectory}: the most characters of steps shown; a longer "
            "trajectory shows its beginning and its end."
        ),
    )
    verdict_format: Format = Field(
        "pass_fail",
        description=(
            'How the reply is read: pass_fail ("Verdict: PASS"), scale_1_5 or '
            'scale_0_10 ("Score: N"), json (an object with a verdict or score key).'
        ),
    )
    pass_threshold: float | None = Field(
        None,
        ge=-1_000_000,
        le=1_000_000,
        description=(
            "A score at least this passes; empty for the default (4 of 1-5, "
            "7 of 0-10, 0.5 for a JSON score)."
        ),
    )
    json_verdict_key: JsonKey = Field(
        "verdict",
        title="JSON verdict key",
        description='json: the key of a verdict ("pass"/"fail", true/false).',
    )
    json_score_key: JsonKey = Field(
        "score",
        title="JSON score key",
        description="json: the key of a numeric score, read when there is no verdict.",
    )
    structured_reply: StructuredReply = Field(
        "auto",
        description=(
            "Ask for a reply constrained to the verdict's JSON schema: auto "
            "finds out once per endpoint what it takes (OpenAI's json_schema, "
            "then json_object with a schema as llama.cpp's server takes it, "
            "then plain text); json_schema or json_object use only that form; "
            "off asks in plain text."
        ),
    )
    temperature: Temperature = 0
    max_tokens: MaxTokens = Field(
        None, le=1_000_000, description="Most tokens a reply may have."
    )
    max_parallel_calls: int = Field(
        4,
        ge=1,
        le=1024,
        description=(
            "Judge calls in flight at once, for this scorer in a run "
            "(formerly concurrency)."
        ),
    )
    max_attempts: int = Field(
        3,
        ge=1,
        le=20,
        description=(
            "Attempts per judge call; only transient failures (network, timeout, "
            "408/425/429/5xx) are retried."
        ),
    )
    timeout_seconds: float = Field(
        30.0,
        ge=0.01,
        le=3600,
        title="Timeout (seconds per call)",
        description="A judge call that takes longer is stopped (and retried).",
    )
    backoff_base_seconds: BackoffBaseSeconds = 0.5
    backoff_max_seconds: BackoffCapSeconds = 30.0
    extra_body: ExtraBody = Field(
        description="Further JSON fields of every request body (seed, ...)."
    )

    @model_validator(mode="before")
    @classmethod
    def _former_names(cls, data: Any) -> Any:
        """Stored runs and older API clients name the call limit ``concurrency``:
        it is read as ``max_parallel_calls``, with a deprecation warning."""
        if not isinstance(data, dict) or FORMER_CALL_LIMIT not in data:
            return data
        data = dict(data)
        value = data.pop(FORMER_CALL_LIMIT)
        if data.get("max_parallel_calls") is not None:
            if value is not None and value != data["max_parallel_calls"]:
                raise FieldError(
                    FORMER_CALL_LIMIT,
                    "is the former name of max_parallel_calls: give only "
                    "max_parallel_calls",
                )
            return data
        warnings.warn(CALL_LIMIT_RENAMED, DeprecationWarning, stacklevel=2)
        data["max_parallel_calls"] = value
        return data

    @field_validator("prompt_template")
    @classmethod
    def _known_fields(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is required")
        for name in template_names(value):
            root = name.split(".")[0]
            if root not in TEMPLATE_FIELDS:
                known = ", ".join(f"{{{field}}}" for field in TEMPLATE_FIELDS)
                raise ValueError(f"names {{{name}}}, which is not a field ({known})")
            if "." in name and root not in ("input", "metadata"):
                raise ValueError(f"names {{{name}}}: only input and metadata have keys")
        if "output" not in {name.split(".")[0] for name in template_names(value)}:
            raise ValueError("must name {output}, the output to judge")
        return value

    @model_validator(mode="after")
    def _threshold_fits(self) -> LLMJudgeParams:
        scale = SCALES.get(self.verdict_format)
        threshold = self.pass_threshold
        if scale and threshold is not None and not scale[0] <= threshold <= scale[1]:
            raise FieldError(
                "pass_threshold",
                f"must be between {scale[0]:g} and {scale[1]:g} for "
                f"{self.verdict_format}, not {threshold:g}",
            )
        return self


def judge_schema(params: LLMJudgeParams) -> dict[str, Any]:
    """The JSON schema of a structured reply in the chosen verdict format."""
    return verdict_schema(
        params.verdict_format,
        verdict_key=params.json_verdict_key,
        score_key=params.json_score_key,
    )


def judge_instructions(params: LLMJudgeParams, *, structured: bool = False) -> str:
    """How to answer, in the chosen verdict format (the prompt's ``{format}``):
    in prose, or as the JSON object a structured reply is constrained to."""
    fmt = params.verdict_format
    if structured:
        return structured_instructions(fmt, judge_schema(params))
    if fmt != "json":
        return INSTRUCTIONS[fmt]
    verdict, score = params.json_verdict_key, params.json_score_key
    return (
        f'Reply with only a JSON object: {{"reasoning": "...", "{verdict}": '
        f'"pass" or "fail", "{score}": a number from 0 to 1}}.'
    )


def names_trajectory(params: LLMJudgeParams) -> bool:
    return "trajectory" in template_names(params.prompt_template)


def judge_messages(
    params: LLMJudgeParams,
    output: Any,
    item: TargetInput,
    trajectory: str = "",
    *,
    structured: bool = False,
) -> list[dict[str, str]]:
    """The messages the judge is sent for ``output`` of ``item`` (and the text
    of its ``trajectory``, when the template names it)."""
    fields = {
        "input": item.input,
        "expected": item.expected,
        "output": as_text(output) if not isinstance(output, dict | list) else output,
        "id": item.external_id,
        "index": item.index,
        "metadata": item.metadata,
        "format": judge_instructions(params, structured=structured),
        "trajectory": trajectory,
    }
    try:
        prompt = fill_template(params.prompt_template, fields)
    except MissingField as exc:
        raise ScorerError(
            f"the judge's template names {{{exc.name}}}, which item "
            f"{item.external_id!r} does not have"
        ) from None
    return with_system(params.system_prompt, [{"role": "user", "content": prompt}])


@register
class LLMJudge(ScorerPlugin[LLMJudgeParams]):
    """Asks a model, over any OpenAI-compatible endpoint, to grade the output.

    The rubric (``prompt_template``) is filled from the item and the output:
    ``{output}``, ``{input}``, ``{expected}``, ``{id}``, ``{index}``,
    ``{metadata.key}``, ``{format}`` (how to answer) and ``{trajectory}``
    (the result's steps, cut to ``trajectory_chars``). The reply is read in
    the ``verdict_format``: ``pass_fail`` ("Verdict: PASS"), ``scale_1_5`` or
    ``scale_0_10`` ("Score: N", passing from ``pass_threshold``) or ``json``
    (an object with a verdict or a score key). With ``structured_reply``
    "auto" the reply is asked for held to the format's JSON schema, in the
    first ``response_format`` the endpoint takes (``judge_replies``). The
    judge's whole reply is the reason, with its tokens and model. Calls are
    retried like a target's (transient failures only, honouring Retry-After)
    and limited to
    ``max_parallel_calls`` at once. A call that still fails, or a reply that cannot
    be read, is a scorer error with the reply kept.
    """

    kind: ClassVar[str] = "llm_judge"
    label: ClassVar[str] = "LLM judge"
    example: ClassVar[dict[str, Any]] = {
        **ENDPOINT_EXAMPLE,
        "verdict_format": "pass_fail",
        "max_parallel_calls": 4,
    }
    secrets: ClassVar[tuple[SecretRef, ...]] = SECRETS
    needs_expected: ClassVar[bool] = False
    needs_steps: ClassVar[bool] = True
    reports_usage: ClassVar[bool] = True

    @classmethod
    def requires_expected(cls, params: dict[str, Any]) -> bool:  # a cleaned config
        template = params.get("prompt_template", DEFAULT_TEMPLATE)
        return any(name == "expected" for name in template_names(template))

    def __init__(
        self,
        name: str,
        params: LLMJudgeParams,
        context: TargetContext | None = None,
    ) -> None:
        super().__init__(name, params)
        self.client = ChatClient(params, context)
        # One limiter per scorer instance, so per run: the executor holds a
        # turn around each call of score (``items.py``).
        self.limiter = asyncio.Semaphore(params.max_parallel_calls)
        self.retry_policy = RetryPolicy(
            params.max_attempts,
            params.timeout_seconds,
            Backoff(params.backoff_base_seconds, params.backoff_max_seconds),
        )
        threshold = params.pass_threshold
        if threshold is None:
            # pass_fail has none and reads none.
            threshold = DEFAULT_THRESHOLDS.get(params.verdict_format, 0.5)
        self.threshold = threshold
        self.schema = judge_schema(params)

    # -- the prompt --------------------------------------------------------------

    def instructions(self) -> str:
        return judge_instructions(self.params)

    def messages(
        self, output: Any, item: TargetInput, form: Form = "text", trajectory: str = ""
    ) -> list[dict[str, str]]:
        return judge_messages(
            self.params, output, item, trajectory, structured=form != "text"
        )

    async def trajectory(self, steps: Sequence[Step]) -> str:
        """The steps as the template's {trajectory}, made off the loop (it
        writes payloads as JSON); "" when the template does not name it."""
        if not names_trajectory(self.params):
            return ""
        limit = self.params.trajectory_chars
        return await asyncio.to_thread(trajectory_text, steps, limit)

    @classmethod
    def prompt_reads_steps(cls, params: LLMJudgeParams) -> bool:
        return names_trajectory(params)

    @classmethod
    def prompt_for(
        cls,
        params: LLMJudgeParams,
        output: Any,
        item: TargetInput,
        steps: Sequence[Step] = (),
    ) -> list[dict[str, str]] | None:
        trajectory = ""
        if names_trajectory(params):
            trajectory = trajectory_text(steps, params.trajectory_chars)
        try:
            return judge_messages(params, output, item, trajectory)
        except ScorerError:  # the template names a field the item lacks
            return None

    # -- the call --------------------------------------------------------------

    async def ask(
        self,
        messages: list[dict[str, str]],
        reply_format: dict[str, Any] | None = None,
    ) -> ChatReply:
        """One judge call under the call policy (``runs.calls.retry``), as a
        target's attempts are; ScorerError when it fails, FormatRefused when
        the endpoint refuses ``reply_format``."""
        params = self.params
        payload = chat_body(params, messages, response_format=reply_format)
        try:
            return await with_retries(
                lambda: self.client.complete(payload),
                policy=self.retry_policy,
                failures=TargetError,
                timed_out=timed_out,
            )
        except GaveUp as gave_up:
            if reply_format is not None and refuses_format(gave_up.failure):
                raise FormatRefused(gave_up.failure) from None
            raise self.failed(gave_up.failure, gave_up.attempts) from None

    async def ask_for_verdict(
        self, output: Any, item: TargetInput, trajectory: str = ""
    ) -> tuple[ChatReply, Form]:
        """The judge's reply, asked for in the best form the endpoint takes
        (remembered per endpoint), and that form."""
        params = self.params
        wanted = params.structured_reply
        if "response_format" in params.extra_body:  # the configuration's own
            wanted = "off"
        forms = forms_to_try(params.base_url, wanted)
        for form in forms:
            try:
                reply = await self.ask(
                    self.messages(output, item, form, trajectory),
                    response_format(form, self.schema),
                )
            except FormatRefused as refused:
                if form == forms[-1]:
                    raise self.failed(refused.failure, 1) from None
                continue
            if wanted == "auto":
                remember(params.base_url, form)
            return reply, form
        raise AssertionError("forms_to_try gives at least one form")

    def failed(self, failure: TargetError, attempts: int) -> ScorerError:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        # A key the endpoint echoes is replaced where the score is recorded.
        return ScorerError(
            f"judge call failed{tries}: {failure.message}",
            reason=(failure.raw_body or "")[:REASON_LIMIT],
            model=self.params.model,
        )

    async def score(
        self, *, output: Any, item: TargetInput, steps: Sequence[Step] = ()
    ) -> ScoreOutcome:
        trajectory = await self.trajectory(steps)
        reply, form = await self.ask_for_verdict(output, item, trajectory)
        text = as_text(reply.content)
        # Whole: the run cuts it once any secret in it is replaced.
        model = reply.model or self.params.model
        usage: dict[str, Any] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            # What the endpoint says the call cost, else its tokens priced
            # by the run's price table (None when the model has no price).
            "cost": reply.cost
            if reply.cost is not None
            else cost_of(model, reply.prompt_tokens, reply.completion_tokens),
            "model": model,
        }
        try:
            value, passed = self.verdict(text, structured=form != "text")
        except ValueError as exc:
            raise ScorerError(
                f"unreadable judge reply: {exc}", reason=text[:REASON_LIMIT], **usage
            ) from None
        return ScoreOutcome(value, passed, text[:REASON_LIMIT], **usage)

    # -- the reply -------------------------------------------------------------

    def verdict(self, text: str, *, structured: bool = False) -> tuple[float, bool]:
        """(value, passed) from a reply in the chosen format; ValueError if none.

        A structured reply is read as its JSON object, and as prose when it is
        not one (an endpoint that took the format but did not follow it).
        """
        fmt = self.params.verdict_format
        if not text.strip():
            raise ValueError("the reply is empty")
        if structured and fmt != "json":
            try:
                return self.read_structured(text)
            except ValueError:  # read as prose: its error says what is missing
                return self.read_prose(text)
        return self.read_prose(text)

    def read_prose(self, text: str) -> tuple[float, bool]:
        fmt = self.params.verdict_format
        if fmt == "pass_fail":
            return read_pass_fail(text)
        if fmt == "json":
            return self.read_json(text)
        low, high = SCALES[fmt]
        value = read_score(text)
        if not low <= value <= high:
            raise ValueError(f"score {value:g} is outside {low:g} to {high:g}")
        return value, self.passes(value)

    def read_structured(self, text: str) -> tuple[float, bool]:
        """A pass_fail or scale reply constrained to its schema."""
        data = json_object(text)
        fmt = self.params.verdict_format
        if fmt == "pass_fail":
            passed = word_verdict(data.get("verdict"))
            if passed is None:
                raise ValueError("the JSON object has no verdict pass or fail")
            return float(passed), passed
        value = data.get("score")
        low, high = SCALES[fmt]
        if not is_number(value) or not low <= value <= high:
            raise ValueError(f"the JSON object has no score from {low:g} to {high:g}")
        return float(value), self.passes(float(value))

    def read_json(self, text: str) -> tuple[float, bool]:
        data = json_object(text)
        verdict_key = self.params.json_verdict_key
        score_key = self.params.json_score_key
        verdict = data.get(verdict_key)
        if verdict is not None:
            passed = word_verdict(verdict)
            if passed is None:
                raise ValueError(f"{verdict_key!r} is {verdict!r}, not pass or fail")
            score = data.get(score_key)
            value = float(score) if is_number(score) else float(passed)
            return value, passed
        score = data.get(score_key)
        if not is_number(score):
            raise ValueError(
                f"the JSON object has neither {verdict_key!r} nor a numeric "
                f"{score_key!r}"
            )
        return float(score), self.passes(float(score))

    def passes(self, value: float) -> bool:
        # Every format with a score has a threshold (DEFAULT_THRESHOLDS).
        assert self.threshold is not None
        return value >= self.threshold

    async def aclose(self) -> None:
        await self.client.aclose()


def timed_out(seconds: float) -> TargetError:
    return TargetError(
        f"judge call exceeded {seconds:g} s",
        kind=ErrorKind.TIMEOUT,
        error_type="Timeout",
    )

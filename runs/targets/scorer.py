"""A scorer as the target: measure a judge against human labels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from runs.models import ErrorKind
from runs.plugins import JsonKey, Params, SecretRef, TargetContext, join
from runs.plugins.scorers import SCORERS, ScorerError, build_scorer, scorers_prepare
from runs.plugins.scoring import ScorerCall
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    register,
)


class ScorerTargetParams(Params):
    scorer_kind: str = Field(
        description="The kind of scorer to run as the target (llm_judge, ...)."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="That scorer's parameters (as in a run's scorer list).",
    )
    output: Literal["verdict", "value"] = Field(
        "verdict",
        description=(
            'verdict: "pass" or "fail" (the value when the scorer gives no '
            "verdict); value: the score's value."
        ),
    )
    input_key: JsonKey = Field(
        "input",
        description="The item's metadata key that holds the judged item's input.",
    )
    expected_key: JsonKey = Field(
        "expected",
        description="The item's metadata key that holds the judged item's "
        "expected answer.",
    )


@register
class ScorerTarget(TargetPlugin[ScorerTargetParams]):
    """Runs a scorer as the target, to measure a judge against human labels.

    The item's input is the output to be judged; its metadata carries the
    rest: the judged item's input under ``metadata.input`` and its expected
    answer under ``metadata.expected`` (``input_key``, ``expected_key``), every
    metadata field as it is. The scorer's verdict becomes the output
    (``pass`` or ``fail``, or its value), so an ``exact_match`` scorer
    against the item's expected answer (the human label) gives the judge's
    agreement. A judge's tokens are the result's tokens; a scorer error is a
    permanent target error that keeps the judge's reply.
    """

    kind: ClassVar[str] = "scorer"
    label: ClassVar[str] = "Scorer (measure a judge)"
    example: ClassVar[dict[str, Any]] = {
        "scorer_kind": "llm_judge",
        "params": {
            "base_url": "https://api.openai.com/v1",
            "model": "gpt-4o-mini",
            "api_key_secret": "OPENAI_API_KEY",
        },
        "output": "verdict",
    }

    # Built with the run's context: the wrapped scorer's secrets (secret_scope).
    needs_context: ClassVar[bool] = True

    @classmethod
    def clean(cls, params: Any, *, path: str = "") -> dict[str, Any]:
        cleaned = super().clean(params, path=path)
        plugin = SCORERS.lookup(cleaned["scorer_kind"], field=join(path, "scorer_kind"))
        cleaned["params"] = plugin.clean(cleaned["params"], path=join(path, "params"))
        return cleaned

    @classmethod
    def secret_scope(
        cls, config: dict[str, Any]
    ) -> tuple[Sequence[SecretRef], dict[str, Any], str]:
        """The wrapped scorer's secrets, named in ``params``.

        ``secrets`` stays empty: they are the scorer's, declared by its kind.
        """
        plugin = SCORERS.get(config.get("scorer_kind") or "")
        refs = plugin.secrets if plugin is not None else ()
        return refs, config.get("params") or {}, "params"

    def __init__(
        self, params: ScorerTargetParams, context: TargetContext | None = None
    ) -> None:
        self.params = params
        spec = {"name": params.scorer_kind, "kind": params.scorer_kind}
        self.scorer = build_scorer({**spec, "params": params.params}, context=context)

    async def prepare(self) -> None:
        """The wrapped scorer's ``prepare``, awaited by the executor before any
        item: a code_exec scorer where the sandbox cannot run fails the run."""
        await scorers_prepare([self.scorer])

    def judged_item(self, item: TargetInput) -> TargetInput:
        metadata = item.metadata or {}
        return TargetInput(
            index=item.index,
            external_id=item.external_id,
            input=metadata.get(self.params.input_key),
            expected=metadata.get(self.params.expected_key),
            metadata=metadata,
        )

    async def generate(self, item: TargetInput) -> TargetOutput:
        call = ScorerCall(self.scorer, item.input, self.judged_item(item))
        try:
            async with self.scorer.turn():
                outcome = await call.run()
        except ScorerError as exc:
            raise TargetError(
                exc.message,
                kind=ErrorKind.PERMANENT,
                raw_body=exc.reason or None,
                error_type="ScorerError",
            ) from None
        if self.params.output == "verdict" and outcome.passed is not None:
            output: Any = "pass" if outcome.passed else "fail"
        else:
            output = outcome.value
        return TargetOutput(
            output=output,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            cost=outcome.cost,
        )

    async def aclose(self) -> None:
        await self.scorer.aclose()

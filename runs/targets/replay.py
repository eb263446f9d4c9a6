"""What the item already holds, as the output: score-only runs over stored outputs."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from runs.models import ErrorKind
from runs.plugins import FieldError, Params, TargetContext
from runs.plugins.targets import (
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    register,
)
from runs.targets.templating import Missing, item_fields, item_path, lookup


class ReplayParams(Params):
    field: str | None = Field(
        None,
        max_length=500,
        description=(
            "Dotted path of the item's value to replay: expected, input, "
            "metadata.answer, input.completion, ..."
        ),
    )
    value: Any = Field(
        None,
        description="A constant output for every item (any JSON value but null).",
    )

    @field_validator("field")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return item_path(value)

    @model_validator(mode="after")
    def _exactly_one(self) -> ReplayParams:
        if (self.field is None) == (self.value is None):
            raise FieldError("field", "give exactly one of field and value")
        return self


@register
class ReplayTarget(TargetPlugin[ReplayParams]):
    """Replays what each item already holds (a field by dotted path, such as
    expected or metadata.answer) or a constant, as the output: scores stored
    outputs, or checks a scorer against known answers, with no call made. An
    item that lacks the field (or holds null there) is a permanent error
    naming it.
    """

    kind: ClassVar[str] = "replay"
    label: ClassVar[str] = "Replay an item field"
    example: ClassVar[dict[str, Any]] = {"field": "expected"}

    def __init__(
        self, params: ReplayParams, context: TargetContext | None = None
    ) -> None:
        self.params = params
        self.field = params.field
        self.value = params.value

    async def generate(self, item: TargetInput) -> TargetOutput:
        if self.field is None:
            return TargetOutput(output=self.value)
        try:
            output = lookup(item_fields(item), self.field)
        except Missing as exc:
            # Every root exists, so the path failed below one: say what is there.
            raise self.missing(item, exc.found_at_parent()) from None
        if output is None:
            raise self.missing(item, "it is null")
        return TargetOutput(output=output)

    def missing(self, item: TargetInput, detail: str) -> TargetError:
        return TargetError(
            f"item {item.external_id!r} has no {self.field}"
            + (f" ({detail})" if detail else ""),
            kind=ErrorKind.PERMANENT,
            error_type="MissingField",
        )

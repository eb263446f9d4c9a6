from __future__ import annotations

import functools
import json
import warnings
from typing import Any, ClassVar

from pydantic import Field, model_validator

from runs.plugins import FieldError, Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, register
from runs.plugins.targets import TargetInput
from runs.pools.processes import JSON, WorkerEnded, WorkTimeout, run_in_process
from runs.pools.threads import run_in_thread
from runs.scorers.item_metadata import (
    MetadataPath,
    given_or_per_item,
    metadata_value,
)
from runs.scorers.patterns import schema_pattern_problem

# The pool's own limit on one validation, for a caller without a timeout:
# the longest scorer timeout a run may set. The run's timeout comes first.
KILL_AFTER_SECONDS = 3600
# Schema values x output characters up to which a single-pass schema is
# validated in a scorer thread (a few milliseconds at most), not a process.
THREAD_WORK = 1_000_000


# The parameter is called schema, as in JSON Schema; on a pydantic model that
# name shadows the deprecated BaseModel.schema(), which nothing here calls.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", 'Field name "schema"', UserWarning)

    class JsonParams(Params):
        fenced: bool = Field(
            False,
            description=(
                "Read the JSON from the output's first ``` fenced block (```json or "
                "plain ```) when it has one; otherwise the whole output must be JSON."
            ),
        )
        # The name users write; it hides pydantic's deprecated schema() method.
        schema: dict[str, Any] | None = Field(  # type: ignore[assignment]  # see above
            None,
            description=(
                "A JSON Schema (draft 2020-12 unless $schema says otherwise) the "
                "value must satisfy; checked when the run is created."
            ),
        )
        schema_field: MetadataPath | None = Field(
            None,
            description=(
                "Dotted path into the item's metadata to a JSON Schema per item "
                "(json_schema, or spec.schema); instead of schema."
            ),
        )
        max_chars: int = Field(
            1_000_000,
            ge=1,
            le=10_000_000,
            description="Longest output read, in characters; a longer one fails.",
        )
        max_depth: int = Field(
            100,
            ge=1,
            le=1000,
            description="Deepest nesting of arrays and objects accepted.",
        )

        _one_schema = given_or_per_item("schema", "schema_field")

        @model_validator(mode="after")
        def _schema_allowed(self) -> JsonParams:
            if self.schema is not None:
                problem = _schema_problem(self.schema, max_depth=self.max_depth)
                if problem:
                    raise FieldError("schema", problem)
            return self


def _schema_problem(schema: Any, *, max_depth: int) -> str:
    """Why the schema is refused (its size, its work, a regular expression
    RE2 cannot run), or ""."""
    # jsonschema and RE2 load with the first schema: a run without one never needs them.
    from runs.pools.json_schemas import schema_problem

    problem = schema_problem(schema, max_depth=max_depth)
    return problem or schema_pattern_problem(schema)


@register
class Json(ScorerPlugin[JsonParams]):
    """Passes when the output is valid JSON, and matches a JSON Schema if one is given.

    The whole output (surrounding whitespace aside) must be one JSON value;
    with ``fenced``, the content of its first ``` fenced block (```json or
    plain) is read instead when there is one. NaN and Infinity are not JSON.
    The schema comes from ``schema`` (checked when the run is created) or,
    per item, from the metadata field ``schema_field`` names (a dotted path);
    a schema's regular expressions run with RE2, in linear time. A failure
    names the first failing path ($.items[0].price) and why. Outputs over
    ``max_chars`` characters or nested deeper than ``max_depth`` fail unread.
    """

    kind: ClassVar[str] = "json"
    label: ClassVar[str] = "Valid JSON (JSON Schema)"
    example: ClassVar[dict[str, Any]] = {
        "fenced": True,
        "schema": {
            "type": "object",
            "required": ["answer"],
            "properties": {"answer": {"type": "string"}},
        },
    }
    needs_expected: ClassVar[bool] = False

    def __init__(self, name: str, params: JsonParams) -> None:
        # jsonschema and RE2 load with the first scorer of this kind (see above).
        from runs.pools.json_validation import single_pass_size

        super().__init__(name, params)
        schema = params.schema
        # As text: what a worker process caches its validator by.
        self.schema_text = None if schema is None else json.dumps(schema)
        self.single_pass = None if schema is None else single_pass_size(schema)

    async def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        limit = self.params.max_chars
        if isinstance(output, str) and len(output) > limit:
            return ScoreOutcome(
                0.0,
                False,
                f"the output has {len(output):,} characters; at most {limit:,} "
                "are read (max_chars)",
            )
        schema_text, source = self.schema_text, "the schema"
        if schema_text is None and self.params.schema_field:
            schema_text, source = self._item_schema(item)
        # Loaded with the scorer (__init__): only the name is looked up here.
        from runs.pools.json_validation import judge

        check = functools.partial(
            judge,
            output,
            schema_text,
            fenced=self.params.fenced,
            max_chars=limit,
            max_depth=self.params.max_depth,
            schema_source=source,
        )
        if self.bounded(output, from_item=schema_text is not self.schema_text):
            return _outcome(await run_in_thread(check, name=self.name))
        # Anything else validates in a worker process, awaited here: work
        # that multiplies cannot be stopped in a thread, and the run's scorer
        # timeout kills the process instead.
        try:
            verdict = await run_in_process(JSON, check, kill_after=KILL_AFTER_SECONDS)
        except WorkTimeout:
            raise ValueError(
                f"validation took over {KILL_AFTER_SECONDS} s and was stopped"
            ) from None
        except WorkerEnded as exc:
            raise ValueError(f"validation stopped: its worker ended ({exc})") from None
        return _outcome(verdict)

    def bounded(self, output: Any, *, from_item: bool) -> bool:
        """Whether the work is bounded and small enough for a scorer thread,
        where it costs less than the hop to a process and back: reading JSON
        without a schema (linear in ``max_chars``), or the run's single-pass
        schema (``single_pass_size``) with an output short enough that
        schema values x characters stay within ``THREAD_WORK``."""
        if from_item:
            return False  # an item's schema: checked and run in the worker
        if self.schema_text is None:
            return True
        if self.single_pass is None:
            return False
        if not isinstance(output, str):
            return False  # a value from the target: its size is not known
        return len(output) * self.single_pass <= THREAD_WORK

    def _item_schema(self, item: TargetInput) -> tuple[str, str]:
        """The item's schema as JSON text (checked in the worker), and where
        it is."""
        path = self.params.schema_field or ""  # called only when it is set
        schema = metadata_value(item, path, what="schema")
        return json.dumps(schema), f"the item's schema at metadata.{path}"


def _outcome(verdict: Any) -> ScoreOutcome:
    return ScoreOutcome(1.0 if verdict.passed else 0.0, verdict.passed, verdict.reason)

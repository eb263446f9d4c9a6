from __future__ import annotations

import json
import warnings
from functools import lru_cache
from typing import Any, ClassVar

import re2
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError, best_match
from pydantic import Field, field_validator, model_validator

from runs.plugins import FieldError, Params
from runs.scorers.base import ScoreOutcome, ScorerPlugin, register
from runs.scorers.patterns import compile_user_pattern
from runs.targets.base import TargetInput

# The first fenced block, its language json or none: ```json\n{...}\n```.
_FENCE = re2.compile(r"(?s)```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```")
# Errors looked at to pick the most relevant one (jsonschema's best_match).
MAX_ERRORS = 50


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
        schema: dict[str, Any] | None = Field(
            None,
            description=(
                "A JSON Schema (draft 2020-12 unless $schema says otherwise) the "
                "value must satisfy; checked when the run is created."
            ),
        )
        schema_field: str | None = Field(
            None,
            max_length=200,
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

        @field_validator("schema")
        @classmethod
        def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
            if schema is not None:
                problem = schema_problem(schema)
                if problem:
                    raise ValueError(problem)
            return schema

        @model_validator(mode="after")
        def _one_schema(self) -> JsonParams:
            if self.schema is not None and self.schema_field:
                raise FieldError(
                    "schema_field", "give schema or schema_field, not both"
                )
            return self


def schema_problem(schema: Any) -> str:
    """Why ``schema`` is not a usable JSON Schema, or "" when it is."""
    if not isinstance(schema, dict | bool):
        return "must be a JSON Schema (an object)"
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = exc.json_path if exc.path else "the schema"
        return f"is not a valid JSON Schema: at {where}: {_short(exc.message)}"
    except RecursionError:
        return "is not a valid JSON Schema: nested too deeply"
    for where, pattern in _patterns(schema):
        try:
            _compiled(pattern)
        except ValueError as exc:
            return f"the regular expression at {where} {exc}"
    return ""


def _patterns(schema: Any, where: str = "$") -> list[tuple[str, str]]:
    """Each ``pattern`` and ``patternProperties`` key of a schema, with its path."""
    found: list[tuple[str, str]] = []
    stack = [(schema, where)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.append((f"{path}.pattern", node["pattern"]))
            if isinstance(node.get("patternProperties"), dict):
                found += [
                    (f"{path}.patternProperties", key)
                    for key in node["patternProperties"]
                ]
            stack += [(value, f"{path}.{key}") for key, value in node.items()]
        elif isinstance(node, list):
            stack += [(value, f"{path}[{i}]") for i, value in enumerate(node)]
    return found


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    return compile_user_pattern(pattern)


# Schema patterns run with RE2 instead of Python's backtracking engine: a
# pattern such as (a+)+$ against a hostile string would otherwise hold the GIL
# for ever. JSON Schema patterns are ECMA-262; RE2 runs the common subset.
def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and not _compiled(pattern).search(
        instance
    ):
        yield ValidationError(f"{_short(repr(instance))} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, _: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _compiled(pattern).search(key):
                yield from validator.descend(
                    value, subschema, path=key, schema_path=pattern
                )


def _additional_properties(
    validator: Any, extra: Any, instance: Any, schema: Any
) -> Any:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = [_compiled(p) for p in schema.get("patternProperties", {})]
    extras = [
        key
        for key in instance
        if key not in known and not any(p.search(key) for p in patterns)
    ]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        shown = ", ".join(repr(key) for key in sorted(extras)[:10])
        yield ValidationError(f"additional properties are not allowed ({shown})")


_RE2_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


def _validator(schema: Any) -> Any:
    cls = validators.validator_for(schema, default=Draft202012Validator)
    return validators.extend(cls, _RE2_KEYWORDS)(schema)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth_over(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack += [(child, depth + 1) for child in children]
    return False


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with {len(value):,} keys"
    if isinstance(value, list):
        return f"an array of {len(value):,} values"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "null"


@register
class Json(ScorerPlugin):
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
    Params = JsonParams
    example: ClassVar[dict[str, Any]] = {
        "fenced": True,
        "schema": {
            "type": "object",
            "required": ["answer"],
            "properties": {"answer": {"type": "string"}},
        },
    }
    needs_expected: ClassVar[bool] = False

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params
        schema = params.get("schema")
        self.validator = None if schema is None else _validator(schema)

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        validator = self.validator or self._item_validator(item)
        value, problem = self._read(output)
        if problem:
            return ScoreOutcome(0.0, False, problem)
        if _depth_over(value, self.params["max_depth"]):
            return ScoreOutcome(
                0.0,
                False,
                f"JSON nested deeper than {self.params['max_depth']} levels "
                "(max_depth)",
            )
        what = _describe(value)
        if validator is None:
            return ScoreOutcome(1.0, True, f"valid JSON: {what}")
        try:
            errors = validator.iter_errors(value)
            first = [error for _, error in zip(range(MAX_ERRORS), errors, strict=False)]
        except RecursionError:
            return ScoreOutcome(0.0, False, "JSON nested too deeply to validate")
        if not first:
            return ScoreOutcome(1.0, True, f"valid JSON matching the schema: {what}")
        error = best_match(first)
        return ScoreOutcome(
            0.0,
            False,
            f"does not match the schema at {error.json_path}: {_short(error.message)}",
        )

    def _read(self, output: Any) -> tuple[Any, str]:
        if output is not None and not isinstance(output, str):
            return output, ""  # already a JSON value (a target returned one)
        text = output or ""
        limit = self.params["max_chars"]
        if len(text) > limit:
            return None, (
                f"the output has {len(text):,} characters; at most {limit:,} are "
                "read (max_chars)"
            )
        source = "the output"
        if self.params["fenced"] and (fence := _FENCE.search(text)):
            text, source = fence.group(1), "the fenced block"
        if not text.strip():
            return None, f"{source} is empty, not JSON"
        try:
            return json.loads(text, parse_constant=_reject_constant), ""
        except json.JSONDecodeError as exc:
            return None, (
                f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} "
                f"column {exc.colno}"
            )
        except RecursionError:
            return None, f"{source} is not valid JSON: nested too deeply"
        except ValueError as exc:  # NaN, or an integer of too many digits
            return None, f"{source} is not valid JSON: {_short(str(exc))}"

    def _item_validator(self, item: TargetInput) -> Any:
        path = self.params.get("schema_field")
        if not path:
            return None
        schema: Any = item.metadata
        for part in path.split("."):
            if not isinstance(schema, dict) or part not in schema:
                raise ValueError(f"the item has no schema at metadata.{path}")
            schema = schema[part]
        problem = schema_problem(schema)
        if problem:
            raise ValueError(f"the item's schema at metadata.{path} {problem}")
        return _validator(schema)

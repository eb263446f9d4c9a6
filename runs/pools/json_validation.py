"""Reading an output as JSON and validating it against a checked schema.

What the ``json`` scorer runs, in a worker process killed at the scorer's
timeout (``runs/pools/processes.py``), or in a scorer thread where the work
is bounded by the sizes of a single-pass schema and a short output
(``single_pass_size``). A schema is checked first (``runs/pools/json_schemas.py``,
cached per schema text); its ``$ref``s never leave it, and its patterns run
with RE2, in linear time. No Django here: a worker imports this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import best_match

from runs.pools.json_schemas import (
    LOCAL_ONLY,
    SchemaProblem,
    check_schema,
    short,
    validator_class,
)

# Errors looked at to pick the most relevant one (jsonschema's best_match).
MAX_ERRORS = 50

# Keywords that make a schema's work more than one pass per subschema and
# value: a $ref can apply a subschema again (and recursively), uniqueItems
# compares every pair of items, unevaluated* validates branches again.
_NOT_SINGLE_PASS = frozenset(
    {
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "uniqueItems",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)


def single_pass_size(schema: Any) -> int | None:
    """The number of values of a schema that validates in one pass, else None.

    Without those keywords a schema is a tree whose every subschema applies
    at most once to each value of an output (a subschema is reached from its
    one parent, either on the same value or on one of its children), and each
    keyword's check is linear (patterns run with RE2). So validating an output
    costs at most about (this size) x (the output's size) steps.
    """
    values = 0
    stack = [schema]
    while stack:
        node = stack.pop()
        values += 1
        if isinstance(node, dict):
            if not _NOT_SINGLE_PASS.isdisjoint(node):
                return None
            stack += node.values()
        elif isinstance(node, list):
            stack += node
    return values


@lru_cache(maxsize=256)
def compiled_pattern(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise SchemaProblem(
            f"has a regular expression the linear-time engine (RE2) cannot run: "
            f"{short(repr(pattern), 100)}: {detail}"
        ) from None


def patterns(schema: Any, where: str = "$") -> list[tuple[str, str]]:
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


# Schema patterns run with RE2 instead of Python's backtracking engine: a
# pattern such as (a+)+$ against a hostile string would otherwise run for
# ever. JSON Schema patterns are ECMA-262; RE2 runs the common subset.
def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and not compiled_pattern(pattern).search(
        instance
    ):
        yield ValidationError(f"{short(repr(instance))} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, _: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if compiled_pattern(pattern).search(key):
                yield from validator.descend(
                    value, subschema, path=key, schema_path=pattern
                )


def _additional_properties(
    validator: Any, extra: Any, instance: Any, schema: Any
) -> Any:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    compiled = [compiled_pattern(p) for p in schema.get("patternProperties", {})]
    extras = [
        key
        for key in instance
        if key not in known and not any(p.search(key) for p in compiled)
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


def validator_for(schema: Any) -> Any:
    """A validator of ``schema`` whose ``$ref``s never leave it (no retrieval;
    jsonschema adds the drafts' own meta-schemas, from memory)."""
    cls = validators.extend(validator_class(schema), _RE2_KEYWORDS)
    return cls(schema, registry=LOCAL_ONLY)


@lru_cache(maxsize=32)
def _prepared(schema_text: str, max_depth: int) -> Any:
    schema = json.loads(schema_text)
    check_schema(schema, max_depth=max_depth)
    for _, pattern in patterns(schema):
        compiled_pattern(pattern)
    return validator_for(schema)


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


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    reason: str


# The first fenced block, its language json or none: ```json\n{...}\n```.
_FENCE = re2.compile(r"(?s)```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```")


def read_json(output: Any, *, fenced: bool, max_chars: int) -> tuple[Any, str]:
    """The JSON value of an output, or why there is none."""
    if output is not None and not isinstance(output, str):
        return output, ""  # already a JSON value (a target returned one)
    text = output or ""
    if len(text) > max_chars:
        return None, (
            f"the output has {len(text):,} characters; at most {max_chars:,} are "
            "read (max_chars)"
        )
    source = "the output"
    if fenced and (fence := _FENCE.search(text)):
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
        return None, f"{source} is not valid JSON: {short(str(exc))}"


def judge(
    output: Any,
    schema_text: str | None,
    *,
    fenced: bool,
    max_chars: int,
    max_depth: int,
    schema_source: str = "the schema",
) -> Verdict:
    """Read ``output`` as JSON and validate it (what a worker process runs).

    ``schema_text`` is the schema as JSON text (the cache's key); a schema
    from an item (``schema_source`` says where) is checked here, and a
    problem with it raises ``ValueError``: a scorer error, not a failure.
    """
    validator = None
    if schema_text is not None:
        try:
            validator = _prepared(schema_text, max_depth)
        except SchemaProblem as exc:
            raise ValueError(f"{schema_source} {exc}") from None
    value, problem = read_json(output, fenced=fenced, max_chars=max_chars)
    if problem:
        return Verdict(False, problem)
    if _depth_over(value, max_depth):
        return Verdict(False, f"JSON nested deeper than {max_depth} levels (max_depth)")
    what = _describe(value)
    if validator is None:
        return Verdict(True, f"valid JSON: {what}")
    try:
        errors = validator.iter_errors(value)
        first = [error for _, error in zip(range(MAX_ERRORS), errors, strict=False)]
    except RecursionError:
        return Verdict(False, "JSON nested too deeply to validate")
    if not first:
        return Verdict(True, f"valid JSON matching the schema: {what}")
    error = best_match(first)
    return Verdict(
        False,
        f"does not match the schema at {error.json_path}: {short(error.message)}",
    )


def warm_up() -> None:
    """A new worker's preparation (``runs/pools/processes.py``): the drafts'
    meta-schemas load once, not inside the first task's timeout."""
    validator_for({"type": "object"}).is_valid({})
    Draft202012Validator.check_schema({"type": "object"})

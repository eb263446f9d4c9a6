"""Valid JSON, against a JSON Schema from the parameters or the item."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest

from runs.errors import ConfigError
from runs.scorers import clean_scorer_specs
from tests.local_http import serve
from tests.scorers.scoring import HUGE, branching_chain, score

PERSON = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z]"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


async def test_any_json_value_passes_without_a_schema() -> None:
    outcome = await score("json", ' {"a": [1, 2, "é"]}\n')

    assert (outcome.value, outcome.passed) == (1.0, True)
    assert outcome.reason == "valid JSON: an object with 1 keys"


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("", "the output is empty, not JSON"),
        (None, "the output is empty, not JSON"),
        ("  \n", "the output is empty, not JSON"),
        ("{'a': 1}", "is not valid JSON: Expecting property name"),
        ('{"a": 1} trailing', "is not valid JSON: Extra data at line 1 column 10"),
        ('{"a": NaN}', "NaN is not JSON"),
        ("Sure! Here it is: {}", "is not valid JSON: Expecting value"),
    ],
)
async def test_what_is_not_json_fails_saying_why(output: str | None, why: str) -> None:
    outcome = await score("json", output)

    assert outcome.passed is False
    assert why in outcome.reason


async def test_fenced_reads_the_first_fenced_block() -> None:
    reply = 'Here you are:\n```json\n{"name": "Ada", "age": 36}\n```\nAnything else?'

    assert (await score("json", reply)).passed is False
    outcome = await score("json", reply, fenced=True)
    assert outcome.passed is True


async def test_a_schema_failure_names_the_first_failing_path() -> None:
    outcome = await score(
        "json", '{"name": "Ada", "age": 36, "tags": ["x", 5]}', schema=PERSON
    )

    assert outcome.passed is False
    assert outcome.reason == (
        "does not match the schema at $.tags[1]: 5 is not of type 'string'"
    )


async def test_a_value_matching_the_schema_passes() -> None:
    outcome = await score("json", '{"name": "Ada", "age": 36}', schema=PERSON)

    assert outcome.passed is True
    assert "matching the schema" in outcome.reason


async def test_missing_and_extra_properties_fail() -> None:
    missing = await score("json", '{"name": "Ada"}', schema=PERSON)
    extra = await score("json", '{"name": "Ada", "age": 1, "x": 2}', schema=PERSON)

    assert "'age' is a required property" in missing.reason
    assert "additional properties are not allowed ('x')" in extra.reason


async def test_schema_patterns_run_in_linear_time() -> None:
    schema = {"type": "string", "pattern": "^(a+)+$"}

    # Backtracking would take longer than the universe on this string.
    outcome = await score("json", json.dumps("a" * 40 + "!"), schema=schema)

    assert outcome.passed is False
    assert "does not match '^(a+)+$'" in outcome.reason


async def test_a_schema_from_the_item_metadata() -> None:
    metadata = {"spec": {"schema": {"type": "array", "maxItems": 2}}}

    ok = await score("json", "[1, 2]", metadata=metadata, schema_field="spec.schema")
    too_long = await score(
        "json", "[1, 2, 3]", metadata=metadata, schema_field="spec.schema"
    )

    assert ok.passed is True
    assert too_long.passed is False
    assert "at $: [1, 2, 3] is too long" in too_long.reason


async def test_an_item_without_its_schema_or_with_a_bad_one_is_a_scorer_error() -> None:
    with pytest.raises(ValueError, match=r"no schema at metadata\.schema"):
        await score("json", "{}", metadata={}, schema_field="schema")
    with pytest.raises(ValueError, match="is not a valid JSON Schema"):
        await score(
            "json", "{}", metadata={"schema": {"type": 7}}, schema_field="schema"
        )


def test_an_invalid_schema_is_refused_when_the_run_is_created() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "json", "params": {"schema": {"type": "strin"}}}])

    assert caught.value.field == "scorers[0].params.schema"
    assert "is not a valid JSON Schema: at $.type" in str(caught.value)


def test_a_schema_pattern_re2_cannot_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="lookahead") as caught:
        clean_scorer_specs(
            [{"kind": "json", "params": {"schema": {"pattern": "(?=a)"}}}]
        )

    assert caught.value.field == "scorers[0].params.schema"


def test_schema_and_schema_field_exclude_each_other() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs(
            [{"kind": "json", "params": {"schema": {}, "schema_field": "s"}}]
        )

    assert caught.value.field == "scorers[0].params.schema_field"


async def test_deep_nesting_fails_cleanly() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    less_deep = "[" * 500 + "]" * 500

    outcome = await score("json", deep, schema={"type": "array"})
    bounded = await score("json", less_deep, schema={"type": "array"})

    assert outcome.passed is False
    assert "nested too deeply" in outcome.reason
    assert bounded.passed is False
    assert "nested deeper than 100 levels" in bounded.reason


async def test_a_huge_output_fails_unread() -> None:
    outcome = await score("json", json.dumps("x" * HUGE), schema={"type": "string"})

    assert outcome.passed is False
    assert "at most 1,000,000 are read (max_chars)" in outcome.reason


async def test_an_output_that_is_already_a_value_is_validated_as_is() -> None:
    outcome = await score("json", {"name": "Ada", "age": 36}, schema=PERSON)

    assert outcome.passed is True


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"items": schema}
    return {"properties": {"deep": schema}}


def refusal(schema: Any) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "json", "params": {"schema": schema}}])
    return caught.value


def test_a_schema_whose_branches_multiply_is_refused_naming_the_limit() -> None:
    # The reported schema: 2^40 evaluations of one number.
    error = refusal(branching_chain(40))

    assert error.field == "scorers[0].params.schema"
    assert "may take over 10,000 subschema evaluations for one value" in str(error)


def test_an_ordinary_recursive_schema_is_accepted() -> None:
    tree = {
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "left": {"$ref": "#"},
            "right": {"$ref": "#"},
        },
    }
    anything = {
        "anyOf": [
            {"type": ["string", "number", "boolean", "null"]},
            {"type": "array", "items": {"$ref": "#"}},
            {"type": "object", "additionalProperties": {"$ref": "#"}},
        ]
    }

    [spec] = clean_scorer_specs(
        [{"kind": "json", "params": {"schema": tree, "max_depth": 1000}}]
    )
    assert spec["params"]["schema"] == tree
    assert clean_scorer_specs([{"kind": "json", "params": {"schema": anything}}])


def test_a_recursion_that_multiplies_level_by_level_is_refused() -> None:
    twice = {"anyOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}]}

    error = refusal(twice)

    assert "subschema evaluations for one value at level" in str(error)


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"$ref": "#"}, "loops for ever: $ applies $ to the same value"),
        ({"anyOf": [{"type": "string"}] * 101}, "has 101 subschemas in anyOf at $"),
        ({"enum": list(range(10_001))}, "is too large: over 10,000 values"),
        (nested(70), "nested deeper than 64 levels"),
        ({"$ref": "#/$defs/missing"}, "which is not in the schema"),
        ({"$dynamicRef": "#meta"}, "uses $dynamicRef at $"),
        ({"$schema": "https://example.com/s", "type": "string"}, "$schema this"),
    ],
    ids=["self-ref", "fan-out", "size", "nesting", "missing-ref", "dynamic", "draft"],
)
def test_a_schema_past_a_limit_is_refused_saying_which(schema: Any, why: str) -> None:
    error = refusal(schema)

    assert error.field == "scorers[0].params.schema"
    assert why in str(error)


class Remote(BaseHTTPRequestHandler):
    """Serves a schema, and remembers that it was asked for one."""

    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.requests.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_a_remote_ref_is_refused_and_never_fetched() -> None:
    Remote.requests.clear()
    with serve(Remote) as base:
        remote = {"properties": {"name": {"$ref": f"{base}/name.json"}}}
        item_schema = {"schema": remote}

        error = refusal(remote)
        with pytest.raises(ValueError, match="which is not in the schema") as caught:
            await score(
                "json", '{"name": 5}', metadata=item_schema, schema_field="schema"
            )

    assert error.field == "scorers[0].params.schema"
    assert "nothing is fetched" in str(error)
    assert "the item's schema at metadata.schema" in str(caught.value)
    assert Remote.requests == []

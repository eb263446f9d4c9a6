"""JSON Schemas from users: refused when their work has no bound, never fetched.

A JSON Schema is a program. ``anyOf`` tries every branch of a value that
matches none, and ``$ref`` can point a branch back into the schema, so forty
lines of ``{"anyOf": [{"$ref": "#/$defs/d1"}, {"$ref": "#/$defs/d1"}]}`` ask
for 2^40 evaluations of one number. So a schema is checked before it is used
(``schema_problem``): its size, its nesting, its ``$ref``s and the fan-out of
``allOf``/``anyOf``/``oneOf``, and an upper bound of the subschemas applied
to any one value of the output (``evaluations``) that multiplies the
branching along every path, through ``$ref``s and down the value's levels.
A ``$ref`` resolves within the schema or not at all: no registry here can
retrieve anything, so validation never reaches the network.

Schemas that pass still validate in a worker process that is killed at the
scorer's timeout (``runs/pools/json_validation.py``): the bound is an estimate, and
an output of a million values multiplies it. Such a worker imports this
module, so it needs no Django: jsonschema and referencing only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError

# What a schema may be. Generous for schemas people write for structured
# output (tens to hundreds of values, a few $refs); far below what makes a
# check or a validation slow.
MAX_VALUES = 10_000  # objects, arrays and scalars in the schema document
MAX_NESTING = 64  # of the schema document's objects and arrays
MAX_REFS = 500
MAX_BRANCHES = 100  # subschemas of one allOf, anyOf or oneOf
# Subschemas applied to one value of the output, at most (worst case).
MAX_EVALUATIONS = 10_000
# Steps of the bound's computation itself, so that checking is bounded too.
MAX_CHECK_STEPS = 1_000_000

# Keywords whose subschemas apply to the value itself, and those whose
# subschemas apply to its items or to its properties' values.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")
_ITEMS_ONE = ("additionalItems", "contains", "unevaluatedItems")
_PROPERTIES_ONE = ("additionalProperties", "unevaluatedProperties", "propertyNames")
# Keywords whose value is resolved dynamically: the bound cannot follow them.
_DYNAMIC = ("$dynamicRef", "$recursiveRef")
# Any item, any property, as opposed to item 3 or property "name".
_ANY_ITEM = ("item", None)
_ANY_PROPERTY = ("property", None)


def short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _refuse(uri: str) -> Any:
    # attrs classes behind referencing's own decorator, which mypy cannot follow.
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs


# No $ref leaves the schema: jsonschema's default registry would fetch a URL
# (a request from the server to wherever a user points it).
LOCAL_ONLY = referencing.Registry(retrieve=_refuse)  # type: ignore[call-arg]  # as above


class SchemaProblem(ValueError):
    """Why a schema cannot be used; the message completes "the schema ..."."""


def schema_problem(schema: Any, *, max_depth: int = 100) -> str:
    """Why ``schema`` is not a usable JSON Schema, or "" when it is.

    ``max_depth`` is the deepest nesting of an output's values that the
    scorer reads: how far down recursive ``$ref``s can multiply the work.
    """
    try:
        check_schema(schema, max_depth=max_depth)
    except SchemaProblem as exc:
        return str(exc)
    return ""


def check_schema(schema: Any, *, max_depth: int = 100) -> None:
    """Raise ``SchemaProblem`` unless ``schema`` is usable and bounded."""
    if not isinstance(schema, dict | bool):
        raise SchemaProblem("must be a JSON Schema (an object)")
    _check_size(schema)
    cls = validator_class(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = exc.json_path if exc.path else "the schema"
        raise SchemaProblem(
            f"is not a valid JSON Schema: at {where}: {short(exc.message)}"
        ) from None
    except RecursionError:
        raise SchemaProblem("is not a valid JSON Schema: nested too deeply") from None
    if isinstance(schema, dict):
        _Bound(schema, cls).check(max_depth)


def validator_class(schema: Any) -> Any:
    """The validator of the draft ``$schema`` names (2020-12 when none)."""
    if not isinstance(schema, dict) or "$schema" not in schema:
        return Draft202012Validator
    dialect = schema["$schema"]
    known = None
    if isinstance(dialect, str):
        # None for a draft it does not know (the stubs allow only a class).
        known = validators.validator_for(schema, default=None)  # type: ignore[arg-type]  # see above
    if known is None:
        raise SchemaProblem(
            f"names a $schema this scorer does not know ({short(repr(dialect))}): "
            "use draft 4, 6, 7, 2019-09 or 2020-12"
        )
    return known


def _check_size(schema: Any) -> None:
    values = 0
    stack = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        values += 1
        if values > MAX_VALUES:
            raise SchemaProblem(
                f"is too large: over {MAX_VALUES:,} values (objects, arrays, "
                "strings, numbers)"
            )
        if isinstance(node, dict | list):
            if depth > MAX_NESTING:
                raise SchemaProblem(f"is nested deeper than {MAX_NESTING} levels")
            children = node.values() if isinstance(node, dict) else node
            stack += [(child, depth + 1) for child in children]


def _places(schema: Any) -> dict[int, str]:
    """Where each object of the schema document is, as a JSON path."""
    places: dict[int, str] = {}
    stack = [(schema, "$")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            places[id(node)] = where
            stack += [(value, f"{where}.{key}") for key, value in node.items()]
        elif isinstance(node, list):
            stack += [(value, f"{where}[{i}]") for i, value in enumerate(node)]
    return places


@dataclass
class _Node:
    """A subschema: where it is, what it applies in place and to children."""

    where: str
    in_place: list[int]
    # (("item", 3) | ("property", "name") | _ANY_ITEM | _ANY_PROPERTY, node)
    children: list[tuple[tuple[str, Any], int]]


class _Linker:
    """Adds a subschema's edges to a node and queues the subschema."""

    def __init__(self, node: _Node, resolver: Any, pending: list[Any]) -> None:
        self.node, self.resolver, self.pending = node, resolver, pending

    def __call__(self, sub: Any, at: str, kind: tuple[str, Any] | None = None) -> None:
        if not isinstance(sub, dict | bool):
            return
        if kind is None:
            self.node.in_place.append(id(sub))
        else:
            self.node.children.append((kind, id(sub)))
        self.pending.append((sub, at, self.resolver))


class _Bound:
    """The most subschemas any one value of an output can be checked against.

    A graph of the schema's subschemas, keyed by identity: in-place edges
    (``allOf``, ``anyOf``, ``$ref``, ...) and child edges (``items``,
    ``properties``, ...). The in-place edges must not cycle (a ``$ref`` back
    to itself loops for ever). Then, level by level of the value, a count of
    how many times each subschema may apply to a value at that level: at one
    level, all in-place edges multiply; to the next, each kind of child
    (item 0, any item, property "a", any property) is followed separately,
    and the largest count of each subschema over them is kept. That is an
    upper bound of the real work (a value is one kind of child), tight
    enough that a tree of ``left``/``right`` ``$ref``s to itself stays flat.
    """

    def __init__(self, schema: dict[str, Any], cls: Any) -> None:
        self.nodes: dict[int, _Node] = {}
        self.refs = 0
        self.steps = 0
        specification = referencing.jsonschema.specification_with(
            cls.META_SCHEMA["$schema"]
        )
        resource = specification.create_resource(schema)
        # A $ref to anything outside the schema is unresolvable.
        self.root_resolver = LOCAL_ONLY.resolver_with_root(resource)
        self.specification = specification
        self.places = _places(schema)
        self.root = self._add(schema, "$", self.root_resolver)

    def _step(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > MAX_CHECK_STEPS:
            raise SchemaProblem(
                "is too intricate to bound the work of a validation; simplify "
                "its $refs and branches"
            )

    def _add(self, root: Any, root_where: str, root_resolver: Any) -> int:
        pending = [(root, root_where, root_resolver)]
        while pending:
            schema, where, resolver = pending.pop()
            key = id(schema)
            if key in self.nodes:
                continue
            self._step()
            where = self.places.get(key, where)
            node = _Node(where, [], [])
            self.nodes[key] = node
            if not isinstance(schema, dict):
                continue  # true or false
            resolver = resolver.in_subresource(
                self.specification.create_resource(schema)
            )
            for keyword in _DYNAMIC:
                if keyword in schema:
                    raise SchemaProblem(
                        f"uses {keyword} at {where}, which this scorer does not "
                        "support: write $ref"
                    )

            link = _Linker(node, resolver, pending)
            if isinstance(schema.get("$ref"), str):
                target, target_resolver = self._resolve(schema["$ref"], where, resolver)
                node.in_place.append(id(target))
                pending.append((target, f"{where}.$ref", target_resolver))
            for keyword in _IN_PLACE_ONE:
                link(schema.get(keyword), f"{where}.{keyword}")
            for keyword in _IN_PLACE_MANY:
                branches = schema.get(keyword)
                if isinstance(branches, list):
                    if len(branches) > MAX_BRANCHES:
                        raise SchemaProblem(
                            f"has {len(branches):,} subschemas in {keyword} at "
                            f"{where}; at most {MAX_BRANCHES} are allowed"
                        )
                    for i, sub in enumerate(branches):
                        link(sub, f"{where}.{keyword}[{i}]")
            for keyword in _IN_PLACE_MAPS:
                if isinstance(schema.get(keyword), dict):
                    for name, sub in schema[keyword].items():
                        link(sub, f"{where}.{keyword}.{name}")
            if any(k in schema for k in ("unevaluatedItems", "unevaluatedProperties")):
                # Finding what was evaluated validates the in-place branches
                # again: count them twice.
                node.in_place += list(node.in_place)
            items = schema.get("items")
            if isinstance(items, list):  # draft 2019-09 and before: a tuple
                for i, sub in enumerate(items):
                    link(sub, f"{where}.items[{i}]", ("item", i))
            else:
                link(items, f"{where}.items", _ANY_ITEM)
            if isinstance(schema.get("prefixItems"), list):
                for i, sub in enumerate(schema["prefixItems"]):
                    link(sub, f"{where}.prefixItems[{i}]", ("item", i))
            for keyword in _ITEMS_ONE:
                link(schema.get(keyword), f"{where}.{keyword}", _ANY_ITEM)
            if isinstance(schema.get("properties"), dict):
                for name, sub in schema["properties"].items():
                    link(sub, f"{where}.properties.{name}", ("property", name))
            if isinstance(schema.get("patternProperties"), dict):
                for name, sub in schema["patternProperties"].items():
                    link(sub, f"{where}.patternProperties.{name}", _ANY_PROPERTY)
            for keyword in _PROPERTIES_ONE:
                link(schema.get(keyword), f"{where}.{keyword}", _ANY_PROPERTY)
        return id(root)

    def _resolve(self, ref: str, where: str, resolver: Any) -> tuple[Any, Any]:
        self.refs += 1
        if self.refs > MAX_REFS:
            raise SchemaProblem(f"has over {MAX_REFS} $refs")
        try:
            resolved = resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            raise SchemaProblem(
                f"has a $ref at {where} to {short(repr(ref))}, which is not in the "
                "schema: a $ref must point within the schema (#/$defs/name or "
                "#anchor); nothing is fetched"
            ) from None
        return resolved.contents, resolved.resolver

    def _in_place_order(self) -> dict[int, int]:
        """Each subschema's rank in a topological order of the in-place edges
        (a node before those it applies in place); a cycle is refused."""
        order: list[int] = []
        state: dict[int, int] = {}  # 1: on the path, 2: done
        for start in self.nodes:
            if start in state:
                continue
            stack = [(start, iter(self.nodes[start].in_place))]
            state[start] = 1
            while stack:
                key, edges = stack[-1]
                self._step()
                following = next(edges, None)
                if following is None:
                    stack.pop()
                    state[key] = 2
                    order.append(key)
                elif state.get(following) == 1:
                    raise SchemaProblem(
                        f"loops for ever: {self.nodes[key].where} applies "
                        f"{self.nodes[following].where} to the same value, which "
                        "leads back to it ($ref)"
                    )
                elif following not in state:
                    state[following] = 1
                    stack.append((following, iter(self.nodes[following].in_place)))
        return {key: rank for rank, key in enumerate(reversed(order))}

    def _closure(self, counts: Counter[int], rank: dict[int, int]) -> Counter[int]:
        """How many times each subschema applies to a value that ``counts``
        apply to directly, following the in-place edges."""
        reached = set(counts)
        stack = list(counts)
        while stack:
            for following in self.nodes[stack.pop()].in_place:
                self._step()
                if following not in reached:
                    reached.add(following)
                    stack.append(following)
        total: Counter[int] = Counter()
        for key, count in counts.items():
            total[key] += count
        for key in sorted(reached, key=rank.__getitem__):
            self._step()
            count = min(total[key], MAX_EVALUATIONS + 1)
            for following in self.nodes[key].in_place:
                total[following] += count
        return total

    def check(self, max_depth: int) -> None:
        rank = self._in_place_order()
        level = self._closure(Counter({self.root: 1}), rank)
        seen: Counter[int] | None = None
        for depth in range(max_depth + 1):
            work = sum(level.values())
            if work > MAX_EVALUATIONS:
                where = " of the output itself" if depth == 0 else f" at level {depth}"
                raise SchemaProblem(
                    f"may take over {MAX_EVALUATIONS:,} subschema evaluations for "
                    f"one value{where}: its allOf/anyOf/oneOf branches and $refs "
                    "multiply along a path; flatten them"
                )
            if not level or level == seen:
                return  # no deeper levels, or every level alike from here
            seen = level
            level = self._next_level(level, rank)

    def _next_level(self, level: Counter[int], rank: dict[int, int]) -> Counter[int]:
        by_kind: dict[tuple[str, Any], Counter[int]] = {}
        for key, count in level.items():
            for kind, child in self.nodes[key].children:
                self._step()
                by_kind.setdefault(kind, Counter())[child] += count
        worst: Counter[int] = Counter()
        for kind, direct in by_kind.items():
            if kind[1] is not None:  # item 3 also gets what any item gets
                anything = _ANY_ITEM if kind[0] == "item" else _ANY_PROPERTY
                direct = direct + by_kind.get(anything, Counter())
            for key, count in self._closure(direct, rank).items():
                worst[key] = max(worst[key], count)
        return worst

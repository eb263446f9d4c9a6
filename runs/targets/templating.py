"""Placeholders filled from an item, and dotted paths into JSON values.

A placeholder is ``{name}`` or ``{name.key.0}``: a dotted path of dictionary
keys and list indices, never attribute access or code, so a template cannot
reach into Python objects. ``{{`` and ``}}`` stand for literal braces.

In a JSON template (``render_json``) a string that is exactly one placeholder
takes the value with its JSON type (a number stays a number, a list a list);
a placeholder inside longer text is replaced by the value as text (strings as
they are, anything else as JSON).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from runs.models import ErrorKind
from runs.plugins.targets import TargetError, TargetInput

PATH = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*"
_TOKEN = re.compile(r"\{\{|\}\}|\{(" + PATH + r")\}")
_WHOLE = re.compile(r"\{(" + PATH + r")\}")
# What the keys of an unexpected JSON value are described with, at most.
KEYS_SHOWN = 20
KEY_CHARS = 40


class Missing(LookupError):
    """A dotted path that a value does not have; ``where`` is the part that failed."""

    def __init__(self, path: str, where: str, found: Any) -> None:
        super().__init__(path)
        self.path = path
        self.where = where
        self.found = found

    def explain(self) -> str:
        """Which part of the path is missing, and what is there instead."""
        return f"{self.where} is missing; found {describe_value(self.found)}"

    def found_at_parent(self) -> str:
        """What the last part of the path was looked for in."""
        parent = self.where.rsplit(".", 1)[0]
        return f"{parent} is {describe_value(self.found)}"


def item_fields(item: TargetInput, **extra: Any) -> dict[str, Any]:
    """The names a template may use for one item (``extra`` adds ``run``...)."""
    return {
        "input": item.input,
        "expected": item.expected,
        "metadata": item.metadata,
        "external_id": item.external_id,
        "id": item.external_id,
        "index": item.index,
        **extra,
    }


ITEM_ROOTS = frozenset({"input", "expected", "metadata", "external_id", "id", "index"})
_PATH = re.compile(PATH)


def dotted_path(value: str, *, like: str) -> str:
    """``value`` stripped, if it is a dotted path; else ValueError (inside a
    parameter validator: the error names the parameter)."""
    value = value.strip()
    if not _PATH.fullmatch(value):
        raise ValueError(f"must be a dotted path {like}")
    return value


def item_path(value: str) -> str:
    """A dotted path into an item's fields (``item_fields``), checked."""
    value = dotted_path(value, like="like expected or metadata.answer")
    root = value.split(".", 1)[0]
    if root not in ITEM_ROOTS:
        raise ValueError(
            f"{root!r} is not an item field (one of {', '.join(sorted(ITEM_ROOTS))})"
        )
    return value


def lookup(value: Any, path: str) -> Any:
    """The value at a dotted path: dict keys, and list indices written as numbers."""
    walked: list[str] = []
    for part in path.split("."):
        walked.append(part)
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise Missing(path, ".".join(walked), value)
        # Only JSON values are walked: no object is ever looked into.
    return value


def describe_value(value: Any) -> str:
    """What was found instead, in a few words: the keys present, bounded."""
    if isinstance(value, dict):
        keys = [_short(str(key)) for key in list(value)[:KEYS_SHOWN]]
        more = len(value) - len(keys)
        shown = ", ".join(keys) + (f" and {more} more" if more > 0 else "")
        return f"an object with keys {shown}" if keys else "an empty object"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if value is None:
        return "null"
    return f"a {type(value).__name__.replace('str', 'string')}"


def _short(text: str) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= KEY_CHARS else text[: KEY_CHARS - 1] + "…"


def placeholders(template: Any) -> Iterator[tuple[str, str]]:
    """Every (location, placeholder path) of a JSON template, for save-time checks."""
    if isinstance(template, str):
        for match in _TOKEN.finditer(template):
            if match.group(1):
                yield "", match.group(1)
    elif isinstance(template, dict):
        for key, value in template.items():
            for where, path in placeholders(value):
                yield _join(str(key), where), path
    elif isinstance(template, list):
        for index, value in enumerate(template):
            for where, path in placeholders(value):
                yield _join(str(index), where), path


def _join(head: str, tail: str) -> str:
    return f"{head}.{tail}" if tail else head


def unknown_roots(template: Any, roots: Iterable[str]) -> tuple[str, str] | None:
    """The first placeholder whose first name is not one of ``roots``, if any."""
    allowed = set(roots)
    for where, path in placeholders(template):
        if path.split(".", 1)[0] not in allowed:
            return where, path
    return None


def _value(fields: dict[str, Any], path: str, item: TargetInput, what: str) -> Any:
    try:
        return lookup(fields, path)
    except Missing as exc:
        raise TargetError(
            f"{what} names {{{path}}}, which item {item.external_id!r} does not "
            f"have ({exc.explain()})",
            kind=ErrorKind.PERMANENT,
            error_type="TemplateError",
        ) from None


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render_text(
    template: str, fields: dict[str, Any], item: TargetInput, *, what: str
) -> str:
    """A text template filled from ``fields``; a missing name is a permanent error."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)[0]  # "{{" -> "{", "}}" -> "}"
        return as_text(_value(fields, match.group(1), item, what))

    return _TOKEN.sub(replace, template)


def render_json(
    template: Any, fields: dict[str, Any], item: TargetInput, *, what: str
) -> Any:
    """A JSON template filled from ``fields``; whole placeholders keep their type."""
    if isinstance(template, str):
        whole = _WHOLE.fullmatch(template)
        if whole:
            return _value(fields, whole.group(1), item, what)
        return render_text(template, fields, item, what=what)
    if isinstance(template, dict):
        return {
            key: render_json(value, fields, item, what=what)
            for key, value in template.items()
        }
    if isinstance(template, list):
        return [render_json(value, fields, item, what=what) for value in template]
    return template

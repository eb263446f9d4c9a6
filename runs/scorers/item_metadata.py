"""A value a scorer reads from each item's metadata, at a dotted path of keys
that one of its parameters names (``schema_field``, ``expected_field``),
instead of the value another parameter gives for every item."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from runs.plugins import FieldError, Params
from runs.plugins.targets import TargetInput

# A dotted path of keys into an item's metadata (``spec.schema``).
MetadataPath = Annotated[str, Field(max_length=200)]


def given_or_per_item(given: str, path: str) -> Any:
    """A model validator: the parameter ``given`` (one value for every item)
    or ``path`` (a ``MetadataPath`` to each item's own), not both."""

    def one_source(params: Params) -> Params:
        if getattr(params, given) is not None and getattr(params, path):
            raise FieldError(path, f"give {given} or {path}, not both")
        return params

    return model_validator(mode="after")(one_source)


def metadata_value(item: TargetInput, path: str, *, what: str) -> Any:
    """The value at ``path`` in the item's metadata; a ValueError saying the
    item has no ``what`` there."""
    value: Any = item.metadata
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ValueError(f"the item has no {what} at metadata.{path}")
        value = value[part]
    return value

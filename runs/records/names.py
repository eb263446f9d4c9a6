"""Names people give things, checked against the column that stores them.

PostgreSQL refuses a value longer than its column (a server error) and
SQLite stores it whole; both are met here first, with the field named.
"""

from __future__ import annotations

from django.db.models import Model

from runs.errors import InvalidInput


def max_length(model: type[Model], column: str = "name") -> int:
    """The longest value ``model.column`` holds."""
    limit = getattr(model._meta.get_field(column), "max_length", None)
    if limit is None:
        raise TypeError(f"{model.__name__}.{column} has no max_length")
    return int(limit)


def clean_name(
    value: str,
    *,
    model: type[Model],
    field: str = "name",
    column: str = "name",
    required: bool = True,
) -> str:
    """``value`` without surrounding spaces; InvalidInput naming ``field`` when
    it is empty (and ``required``) or longer than ``model.column`` holds."""
    name = value.strip()
    if required and not name:
        raise InvalidInput("is required", field=field)
    limit = max_length(model, column)
    if len(name) > limit:
        raise InvalidInput(
            f"must be at most {limit} characters, not {len(name)}", field=field
        )
    return name

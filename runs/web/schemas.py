"""Schema pieces every router shares: ids, error bodies, a checked body."""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Field, Schema
from ninja.schema import DjangoGetter
from pydantic import AfterValidator, model_validator

# Ids and page numbers beyond what the database stores are refused (422), not
# sent to it (an overflow there was a 500).
MAX_DB_INT = 2**63 - 1
DbId = Annotated[int, Field(ge=1, le=MAX_DB_INT)]


def _without_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError(
            "contains a NUL character (\\u0000), which no text column holds"
        )
    return value


# Text of a query string that a filter compares with a column: PostgreSQL
# refuses a NUL in text, so it is refused here (422), not there (a 500).
QueryText = Annotated[str, AfterValidator(_without_nul)]


class ValidationErrorOut(Schema):
    detail: list[dict[str, Any]] = Field(
        description="one entry per invalid value: its location, message and type"
    )


class ErrorOut(Schema):
    detail: str
    field: str | None = None
    line: int | None = Field(None, description="1-based line of an uploaded file")
    record: int | None = Field(
        None, description="1-based position in a list of items or a JSON/YAML array"
    )


class BodyIn(Schema):
    """A request body: a JSON object, never anything else.

    ninja's schemas also read attributes of arbitrary objects (for responses),
    so a body of ``[null, null]`` would otherwise pass as an object whose fields
    all take their defaults.
    """

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        raw = data._obj if isinstance(data, DjangoGetter) else data
        if not isinstance(raw, dict):
            raise ValueError("must be a JSON object")
        _storable(raw, "body")
        return data


def _storable(value: Any, where: str) -> None:
    """Refuse text no database can store: NUL characters and lone surrogates.

    PostgreSQL refuses both (in text and in JSON), so they would otherwise be a
    server error at the first write; pages' form fields refuse them already.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where} contains a NUL character (\\u0000)")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where} contains an unpaired surrogate") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key, where)
            _storable(item, f"{where}.{key}")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _storable(item, f"{where}[{position}]")

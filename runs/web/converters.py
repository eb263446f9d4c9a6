"""The ``id`` path converter of every page's URL."""

from __future__ import annotations

from runs.web.schemas import MAX_DB_INT


class IdConverter:
    """A database id: digits within the database's integer range, else 404."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 1 <= number <= MAX_DB_INT:
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)

"""Domain errors, mapped to HTTP once in the API and shown as messages on pages."""

from __future__ import annotations


class DomainError(Exception):
    status_code = 400


class InvalidInput(DomainError):
    """Bad input, naming the field and, for files, the line."""

    def __init__(
        self, message: str, *, field: str | None = None, line: int | None = None
    ) -> None:
        self.message = message
        self.field = field
        self.line = line
        where = []
        if line is not None:
            where.append(f"line {line}")
        if field:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)

    def as_dict(self) -> dict[str, object]:
        return {"detail": str(self), "field": self.field, "line": self.line}


class ConfigError(InvalidInput):
    """A target, scorer or run configuration that cannot work, naming the field.

    The field is the whole path from the request (``target_config.model``,
    ``scorers[1].params.pattern``, ``options.concurrency``), so every surface
    can show it where it belongs without rewriting it.
    """


class NotFound(DomainError):
    status_code = 404


class Forbidden(DomainError):
    status_code = 403


class Conflict(DomainError):
    status_code = 409


class TooManyRequests(DomainError):
    """A person's limit is reached; ``retry_after`` says in how many seconds to
    try again (the ``Retry-After`` header)."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        self.message = message
        self.retry_after = retry_after
        super().__init__(message)

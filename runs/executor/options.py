"""Run options: one frozen dataclass, validated once."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from runs.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class RunOptions:
    concurrency: int = 8
    timeout_seconds: float = 60.0
    max_attempts: int = 3
    epochs: int = 1
    scorer_timeout_seconds: float = 60.0
    backoff_base_seconds: float = 0.5
    backoff_max_seconds: float = 30.0
    # Optional limits; None means none.
    deadline_seconds: float | None = None
    retry_budget: int | None = None
    rate_limit_rpm: float | None = None
    # Lower concurrency on a burst of 429s, raise it back as calls succeed.
    adaptive_concurrency: bool = True
    # Stop a run whose items mostly fail: after fail_fast_min_items results,
    # when the failed fraction reaches fail_fast_error_rate.
    fail_fast_error_rate: float | None = None
    fail_fast_min_items: int = 20
    # How long the database may stay unavailable before the run stops.
    storage_timeout_seconds: float = 30.0

    # name: (type, lowest, highest)
    SPEC = {
        "concurrency": (int, 1, 1024),
        "timeout_seconds": (float, 0.01, 24 * 3600),
        "max_attempts": (int, 1, 20),
        "epochs": (int, 1, 100),
        "scorer_timeout_seconds": (float, 0.01, 3600),
        "backoff_base_seconds": (float, 0.0, 60),
        "backoff_max_seconds": (float, 0.0, 600),
        "deadline_seconds": (float, 0.1, 7 * 24 * 3600),
        "retry_budget": (int, 0, 10_000_000),
        "rate_limit_rpm": (float, 0.1, 10_000_000),
        "adaptive_concurrency": (bool, None, None),
        "fail_fast_error_rate": (float, 0.0, 1.0),
        "fail_fast_min_items": (int, 1, 10_000_000),
        "storage_timeout_seconds": (float, 0.1, 3600),
    }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> RunOptions:
        """Build options from user input, naming the field that is wrong."""
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.SPEC))
        if unknown:
            raise InvalidInput("is not a run option", field=unknown[0])
        values = {
            name: _clean(name, raw, *cls.SPEC[name])
            for name, raw in data.items()
            if raw is not None and raw != ""
        }
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean(
    name: str, raw: Any, kind: type, low: float | None, high: float | None
) -> Any:
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("true", "1", "yes", "on"):
            return True
        if str(raw).lower() in ("false", "0", "no", "off"):
            return False
        raise InvalidInput(f"must be true or false, not {raw!r}", field=name)
    if isinstance(raw, bool):
        raise InvalidInput(f"must be a number, not {raw!r}", field=name)
    try:
        value = kind(raw)
        if kind is int and float(raw) != value:
            raise ValueError
    except (TypeError, ValueError):
        noun = "a whole number" if kind is int else "a number"
        raise InvalidInput(f"must be {noun}, not {raw!r}", field=name) from None
    if not low <= value <= high:  # type: ignore[operator]
        raise InvalidInput(f"must be between {low} and {high}, not {value}", field=name)
    return value

"""Run options: one frozen dataclass, validated once."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
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

    LIMITS = {
        "concurrency": (1, 1024),
        "timeout_seconds": (0.01, 24 * 3600),
        "max_attempts": (1, 20),
        "epochs": (1, 100),
        "scorer_timeout_seconds": (0.01, 3600),
        "backoff_base_seconds": (0.0, 60),
        "backoff_max_seconds": (0.0, 600),
    }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> RunOptions:
        """Build options from user input, naming the field that is wrong."""
        data = dict(data or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise InvalidInput("is not a run option", field=unknown[0])
        values: dict[str, Any] = {}
        for name, field in known.items():
            if data.get(name) is None:
                continue
            kind = int if field.type in ("int", int) else float
            raw = data[name]
            if isinstance(raw, bool):
                raise InvalidInput(f"must be a number, not {raw!r}", field=name)
            try:
                value = kind(raw)
            except (TypeError, ValueError):
                raise InvalidInput(
                    f"must be a number, not {raw!r}", field=name
                ) from None
            if kind is int and float(raw) != value:
                raise InvalidInput(f"must be a whole number, not {raw!r}", field=name)
            low, high = cls.LIMITS[name]
            if not low <= value <= high:
                raise InvalidInput(
                    f"must be between {low} and {high}, not {value}", field=name
                )
            values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

"""The scorer protocol: judge one output against the item's expected value."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from runs.targets.base import ConfigError, TargetInput


@dataclass(frozen=True, slots=True)
class ScoreOutcome:
    value: float
    passed: bool | None
    reason: str = ""


class Scorer(Protocol):
    """Judges one output; raises to record a scorer error.

    ``score`` is a plain method when it computes (matching, parsing, comparing):
    the executor runs it in the scorer worker pool, never on the event loop,
    under the run's scorer timeout (``runs/executor/scoring.py``). It returns in
    bounded time and holds the GIL only briefly: user patterns go through RE2
    (``patterns.py``), huge texts are worked in slices (``text.py``). Only a
    scorer that waits on I/O (a judge model over HTTP) defines ``async def
    score``; that runs on the loop and must not compute.
    """

    kind: ClassVar[str]
    name: str

    def score(
        self, *, output: Any, item: TargetInput
    ) -> ScoreOutcome | Awaitable[ScoreOutcome]: ...


class ScorerFactory(Protocol):
    kind: ClassVar[str]
    label: ClassVar[str]

    @classmethod
    def clean_params(cls, params: dict[str, Any]) -> dict[str, Any]: ...

    def __init__(self, name: str, params: dict[str, Any]) -> None: ...


REGISTRY: dict[str, type[ScorerFactory]] = {}


def register[T: type](cls: T) -> T:
    REGISTRY[cls.kind] = cls  # type: ignore[attr-defined]
    return cls


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(value)


def clean_scorer_specs(specs: list[Any]) -> list[dict[str, Any]]:
    """Normalise scorer specs to ``{"name", "kind", "params"}``; names are unique."""
    if not isinstance(specs, list):
        raise ConfigError("scorers", "must be a list")
    cleaned: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, spec in enumerate(specs):
        if isinstance(spec, str):
            spec = {"kind": spec}
        if not isinstance(spec, dict):
            raise ConfigError(f"scorers[{position}]", "must be a kind or an object")
        kind = spec.get("kind")
        if kind not in REGISTRY:
            known = ", ".join(sorted(REGISTRY))
            raise ConfigError(
                f"scorers[{position}].kind", f"unknown scorer {kind!r} (known: {known})"
            )
        name = str(spec.get("name") or kind)
        if name in seen:
            raise ConfigError(f"scorers[{position}].name", f"{name!r} is used twice")
        seen.add(name)
        params = spec.get("params") or {}
        if not isinstance(params, dict):
            raise ConfigError(f"scorers[{position}].params", "must be an object")
        try:
            params = REGISTRY[kind].clean_params(params)
        except ConfigError as exc:
            raise ConfigError(
                f"scorers[{position}].params.{exc.field}", exc.message
            ) from None
        cleaned.append({"name": name, "kind": kind, "params": params})
    return cleaned


def build_scorer(spec: dict[str, Any]) -> Scorer:
    cls = REGISTRY[spec["kind"]]
    return cls(spec["name"], cls.clean_params(spec.get("params") or {}))  # type: ignore[return-value]

"""The scorer protocol: judge one output against the item's expected value."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from runs.errors import ConfigError
from runs.plugins import Plugin, check_declaration, join
from runs.targets.base import TargetInput


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
    """A scorer kind's declaration (see ``runs.plugins.Plugin``) and factory."""

    kind: ClassVar[str]
    label: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    example: ClassVar[dict[str, Any]]
    secrets: ClassVar[tuple[str, ...]]
    # Whether the scorer compares with the item's expected answer.
    needs_expected: ClassVar[bool]

    @classmethod
    def clean(cls, params: Any, *, path: str = "") -> dict[str, Any]: ...

    @classmethod
    def summary(cls) -> str: ...

    @classmethod
    def requires_expected(cls, params: dict[str, Any]) -> bool: ...

    def __init__(self, name: str, params: dict[str, Any]) -> None: ...


class ScorerPlugin(Plugin):
    """A scorer's declaration: a plug-in's, and whether it needs the expected answer."""

    needs_expected: ClassVar[bool] = True

    @classmethod
    def requires_expected(cls, params: dict[str, Any]) -> bool:
        """Whether these parameters make the scorer read the expected answer."""
        return cls.needs_expected


REGISTRY: dict[str, type[ScorerFactory]] = {}


def register[T: type](cls: T) -> T:
    check_declaration(cls, role="scorer", method="score")
    REGISTRY[cls.kind] = cls  # type: ignore[attr-defined]
    return cls


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(value)


def clean_scorer_specs(specs: Any, *, path: str = "scorers") -> list[dict[str, Any]]:
    """Normalise scorer specs to ``{"name", "kind", "params"}``; names are unique."""
    if not isinstance(specs, list):
        raise ConfigError("must be a list", field=path)
    cleaned: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, spec in enumerate(specs):
        where = join(path, position)
        if isinstance(spec, str):
            spec = {"kind": spec}
        if not isinstance(spec, dict):
            raise ConfigError("must be a kind or an object", field=where)
        kind = spec.get("kind")
        if kind not in REGISTRY:
            known = ", ".join(sorted(REGISTRY))
            raise ConfigError(
                f"unknown scorer {kind!r} (known: {known})", field=join(where, "kind")
            )
        name = str(spec.get("name") or kind)
        if name in seen:
            raise ConfigError(f"{name!r} is used twice", field=join(where, "name"))
        seen.add(name)
        params = REGISTRY[kind].clean(
            spec.get("params") or {}, path=join(where, "params")
        )
        cleaned.append({"name": name, "kind": kind, "params": params})
    return cleaned


def build_scorer(spec: dict[str, Any]) -> Scorer:
    cls = REGISTRY[spec["kind"]]
    return cls(spec["name"], cls.clean(spec.get("params") or {}))  # type: ignore[return-value]

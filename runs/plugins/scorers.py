"""The scorer protocol: judge one output against the item's expected value.

What the executor sees of a scorer: its outcome and error, its conditions,
the registry of kinds and ``build_scorer``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Collection, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Protocol

from django.conf import settings

from runs.errors import ConfigError
from runs.plugins.declaration import Plugin, TargetContext
from runs.plugins.params import Params, join
from runs.plugins.registry import Registry
from runs.plugins.steps import Step
from runs.plugins.targets import TargetInput

# What a scorer plug-in is written against; ``runs.scorers.base`` and the
# package ``runs.scorers`` hand these names on.
__all__ = [
    "INLINE_CHARS",
    "REGISTRY",
    "SCORERS",
    "Condition",
    "ScoreOutcome",
    "Scorer",
    "ScorerError",
    "ScorerPlugin",
    "as_text",
    "build_scorer",
    "clean_scorer_specs",
    "register",
]


@dataclass(frozen=True, slots=True)
class ScoreOutcome:
    value: float
    passed: bool | None
    reason: str = ""
    # What a judge model used (llm_judge); None / empty for other scorers.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    model: str = ""


# Compared and shown as any exception is (by identity; by its message).
@dataclass(eq=False, repr=False)
class ScorerError(Exception):
    """A scorer could not judge; what it has to show stays with the error.

    A judge raises it with the raw reply it could not parse (``reason``) and
    the tokens that reply cost, so that both are stored with the score error.
    """

    message: str
    _: KW_ONLY
    reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    model: str = ""

    def __post_init__(self) -> None:
        super().__init__(self.message)


@dataclass(frozen=True, slots=True)
class Condition:
    """``when`` of a scorer spec: run only if ``scorer`` passed (or failed)."""

    scorer: str
    passed: bool

    def skip_reason(self, *, passed: bool | None, errored: bool, skipped: bool) -> str:
        """Why the condition does not hold for this outcome; "" when it holds."""
        if errored:
            return f"skipped: {self.scorer} errored"
        if skipped:
            return f"skipped: {self.scorer} was skipped"
        if passed is None:
            return f"skipped: {self.scorer} gave no verdict"
        if passed != self.passed:
            return f"skipped: {self.scorer} {'passed' if passed else 'failed'}"
        return ""


def conditions_of(specs: list[dict[str, Any]]) -> dict[str, Condition]:
    """The conditions of (cleaned) scorer specs, by the name of the scorer."""
    return {
        spec["name"]: Condition(spec["when"]["scorer"], spec["when"]["passed"])
        for spec in specs
        if spec.get("when")
    }


class Scorer(Protocol):
    """Judges one output; raises to record a scorer error.

    ``score`` is a plain method when it computes (matching, parsing, comparing):
    the executor runs it in the scorer worker pool, never on the event loop,
    under the run's scorer timeout (``runs/plugins/scoring.py``). It returns in
    bounded time and holds the GIL only briefly: user patterns go through RE2
    (``patterns.py``), huge texts are worked in slices (``text.py``). Only a
    scorer that waits on I/O (a judge model over HTTP) defines ``async def
    score``; that runs on the loop and must not compute. So does a scorer
    whose work an input can make unbounded (``json``, ``math``): it awaits
    that work in a worker process, killed at the timeout
    (``runs/pools/processes.py``), or in a scorer thread where the work is
    provably bounded (``runs/pools/threads.py``).

    A scorer kind that declares ``secrets`` (``SecretRef``) is
    built as ``cls(name, params, context)`` with the run's secret context, as
    a target is. One with a ``limiter`` (an asyncio semaphore) gets a turn of
    it around each call; waiting for the turn is not counted in the timeout.
    A scorer raises ``ScorerError`` to keep a reason (a judge's raw reply)
    and usage with its error.

    A scorer that declares ``needs_steps`` judges how the answer was reached:
    it is called as ``score(output=..., item=..., steps=[Step, ...])`` with
    the result's trajectory (``runs/plugins/steps.py``; empty when the target
    reported none).
    """

    kind: ClassVar[str]
    inline_chars: ClassVar[int]
    needs_steps: ClassVar[bool]
    name: str

    def score(
        self, *, output: Any, item: TargetInput
    ) -> ScoreOutcome | Awaitable[ScoreOutcome]: ...

    def turn(self) -> contextlib.AbstractAsyncContextManager[Any]: ...

    async def prepare(self) -> None: ...

    async def aclose(self) -> None: ...


# Texts up to this size (an output and its expected answers together) are
# scored on the loop by the scorers that allow it (``inline_chars``): a few
# microseconds of work, where a worker thread costs a hop each way.
INLINE_CHARS = 2_000


class ScorerPlugin[P: Params](Plugin):
    """A scorer's declaration: a plug-in's, and whether it needs the expected answer.

    ``build_scorer`` makes one with its name and validated ``Params`` (of type
    ``P``); a scorer that prepares more from them extends ``__init__``.
    """

    needs_expected: ClassVar[bool] = True
    # Whether ``score`` takes the result's trajectory (``steps=``): a
    # trajectory scorer's, or a judge's that shows it.
    needs_steps: ClassVar[bool] = False
    # Whether its scores carry the tokens and cost of a model call (a judge):
    # an export then has columns for them.
    reports_usage: ClassVar[bool] = False
    # A scorer whose work is a few linear passes over its texts may score an
    # output and expected answers of at most this many characters on the
    # loop: cheaper there than the hop to a worker thread and back (0: never;
    # see runs/plugins/scoring.py).
    inline_chars: ClassVar[int] = 0

    # A scorer with its own limit of calls in flight (a judge) sets one per
    # instance, so per run: the executor holds a turn around each call of
    # ``score`` and starts the scorer timeout once it has one.
    limiter: asyncio.Semaphore | None = None
    name: str
    params: P

    def __init__(self, name: str, params: P) -> None:
        self.name = name
        self.params = params

    @classmethod
    def requires_expected(cls, params: dict[str, Any]) -> bool:
        """Whether these parameters make the scorer read the expected answer."""
        return cls.needs_expected

    @classmethod
    def catalogue_extra(cls) -> dict[str, Any]:
        return {"needs_expected": cls.needs_expected, "needs_steps": cls.needs_steps}

    @classmethod
    def prompt_reads_steps(cls, params: P) -> bool:
        """Whether ``prompt_for`` shows the trajectory (the page then reads it)."""
        return False

    @classmethod
    def prompt_for(
        cls, params: P, output: Any, item: TargetInput, steps: Sequence[Step] = ()
    ) -> list[dict[str, str]] | None:
        """The messages a scorer that asks a model (a judge) sends for this
        output (and trajectory), derived as ``score`` builds them (what a
        result's page shows); None for the others."""
        return None

    async def prepare(self) -> None:
        """ConfigError when it cannot work in this process, before any item runs."""

    async def aclose(self) -> None:
        """Release what it holds (a judge's connection pool) once the run has ended."""

    def turn(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """A turn of the scorer's own call limit, if it has one."""
        return self.limiter if self.limiter is not None else contextlib.nullcontext()


async def scorers_prepare(scorers: Collection[Scorer]) -> None:
    """Each scorer's ``prepare``: a run that cannot score stops first."""
    for scorer in scorers:
        await scorer.prepare()


SCORERS: Registry[type[ScorerPlugin[Any]]] = Registry("scorer", ScorerPlugin, "score")
REGISTRY = SCORERS
register = SCORERS.register


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(value)


def clean_scorer_specs(
    specs: Any, *, path: str = "scorers", earlier: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Normalise scorer specs to ``{"name", "kind", "params"}`` (and ``when``).

    Names are unique. A ``when`` names a scorer declared earlier, so that
    conditions can never form a cycle; ``earlier`` are names declared before
    these specs (a run's scorers, for a re-score of some of them).
    """
    if not isinstance(specs, list):
        raise ConfigError("must be a list", field=path)
    limit = settings.EVALSITE_MAX_SCORERS
    if len(specs) > limit:
        raise ConfigError(
            f"has {len(specs)} scorers; at most {limit} (EVALSITE_MAX_SCORERS)",
            field=path,
        )
    cleaned: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, spec in enumerate(specs):
        where = join(path, position)
        if isinstance(spec, str):
            spec = {"kind": spec}
        if not isinstance(spec, dict):
            raise ConfigError("must be a kind or an object", field=where)
        unknown = sorted(set(spec) - {"kind", "name", "params", "when"})
        if unknown:
            raise ConfigError(
                "is not a field of a scorer (kind, name, params, when)",
                field=join(where, unknown[0]),
            )
        kind = spec.get("kind")
        plugin = SCORERS.lookup(kind, field=join(where, "kind"))
        name = clean_scorer_name(
            spec.get("name"), plugin.kind, field=join(where, "name")
        )
        if name in seen:
            raise ConfigError(f"{name!r} is used twice", field=join(where, "name"))
        params = plugin.clean(spec.get("params") or {}, path=join(where, "params"))
        entry: dict[str, Any] = {"name": name, "kind": kind, "params": params}
        if spec.get("when") is not None:
            entry["when"] = _clean_when(
                spec["when"], name=name, seen=seen | set(earlier),
                later=_names_after(specs, position),
                path=join(where, "when"),
            )  # fmt: skip
        seen.add(name)
        cleaned.append(entry)
    return cleaned


MAX_NAME_LENGTH = 100  # Score.scorer


def clean_scorer_name(name: Any, kind: str, *, field: str) -> str:
    if name is None or name == "":
        return kind
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("must be a non-empty string", field=field)
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(f"must be at most {MAX_NAME_LENGTH} characters", field=field)
    return name


def _names_after(specs: list[Any], position: int) -> set[str]:
    names = set()
    for spec in specs[position + 1 :]:
        if isinstance(spec, str):
            names.add(spec)
        elif isinstance(spec, dict):
            name = spec.get("name") or spec.get("kind")
            if isinstance(name, str):
                names.add(name.strip())
    return names


def _clean_when(
    when: Any, *, name: str, seen: set[str], later: set[str], path: str
) -> dict[str, Any]:
    if not isinstance(when, dict):
        raise ConfigError(
            'must be an object: {"scorer": "<name>", "passed": true or false}',
            field=path,
        )
    unknown = sorted(set(when) - {"scorer", "passed"})
    if unknown:
        raise ConfigError(
            "is not a field of when (scorer, passed)", field=join(path, unknown[0])
        )
    other = when.get("scorer")
    if not isinstance(other, str) or not other.strip():
        raise ConfigError(
            "is required: the name of another scorer", field=join(path, "scorer")
        )
    other = other.strip()
    if other == name:
        raise ConfigError(
            f"{name!r} cannot depend on itself", field=join(path, "scorer")
        )
    if other not in seen:
        message = (
            f"{other!r} comes after {name!r}: a condition names a scorer declared "
            "earlier (so that conditions never form a cycle)"
            if other in later
            else f"no scorer named {other!r} before {name!r} in this run"
        )
        raise ConfigError(message, field=join(path, "scorer"))
    passed = when.get("passed")
    if not isinstance(passed, bool):
        raise ConfigError("must be true or false", field=join(path, "passed"))
    return {"scorer": other, "passed": passed}


def build_scorer(
    spec: dict[str, Any], *, context: TargetContext | None = None
) -> Scorer:
    """Build a scorer; one that declares secrets gets them through ``context``."""
    cls = SCORERS[spec["kind"]]
    params = cls.parse(spec.get("params") or {})
    # A plug-in class's constructor is its own (the Protocol has none).
    if cls.uses_context():
        return cls(spec["name"], params, context)  # type: ignore[call-arg,return-value]  # see above
    return cls(spec["name"], params)  # type: ignore[return-value]  # see above


def secret_values(context: TargetContext | None) -> tuple[str, ...]:
    """The secret values of a context, for redaction."""
    secrets: Mapping[str, str] = context.secrets if context else {}
    return tuple(value for value in secrets.values() if value)

"""The target protocol: something that turns one dataset item into an output.

What the executor sees of a target: its input and output types, its error,
the registry of kinds and ``build_target``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from django.conf import settings

from runs.errors import ConfigError
from runs.models import Dataset, ErrorKind, Project, Run
from runs.plugins.declaration import Plugin, TargetContext
from runs.plugins.params import Params
from runs.plugins.registry import Registry
from runs.plugins.steps import Step

# What a target plug-in is written against; ``runs.targets.base`` and the
# package ``runs.targets`` hand these names on.
__all__ = [
    "REGISTRY",
    "TARGETS",
    "Target",
    "TargetError",
    "TargetInput",
    "TargetOutput",
    "TargetPlugin",
    "build_target",
    "clean_target_config",
    "get_target_class",
    "register",
]


@dataclass(frozen=True, slots=True)
class TargetInput:
    """What a target and a scorer see of one item."""

    index: int
    external_id: str
    input: Any
    expected: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # The epoch of the run this answer is for (0 outside a run).
    epoch: int = 0


@dataclass(slots=True)
class TargetOutput:
    output: Any
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    http_status: int | None = None
    # The response as received, kept on the attempt (bounded) when a target
    # returns it: what a tool call or a parse was made from.
    raw_body: str | None = None

    # The model that answered, as the endpoint reports it (prices its tokens).
    model: str | None = None
    # Why the model stopped, as the endpoint says ("stop", "length": cut at
    # max_tokens, "tool_calls", ...); kept on the attempt.
    finish_reason: str | None = None
    # An agent's trajectory, in order (runs/plugins/steps.py); stored with
    # the result and counted in its tokens and cost by the target itself.
    steps: list[Step] | None = None


class TargetError(Exception):
    """A target could not answer; ``kind`` decides whether it is retried."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind = ErrorKind.PERMANENT,
        http_status: int | None = None,
        raw_body: str | None = None,
        retry_after: float | None = None,
        error_type: str | None = None,
        usage: TargetOutput | None = None,
        call_attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.http_status = http_status
        self.raw_body = raw_body
        self.retry_after = retry_after
        self.error_type = error_type or type(self).__name__
        # What a failed call consumed, when the endpoint said (its tokens,
        # model and cost; the output is unused): it is paid for all the same.
        self.usage = usage
        # The attempts the target itself made of the call that failed, by the
        # run's retry rules (an agent's model call, ``calls.retry.RunRetries``);
        # 0 when it made none of its own. The executor does not run such an
        # item again: that would repeat every call before the failing one and
        # multiply its retries.
        self.call_attempts = call_attempts


class Target(Protocol):
    kind: ClassVar[str]

    async def generate(self, item: TargetInput) -> TargetOutput:
        """Answer one item or raise TargetError."""
        ...

    async def prepare(self) -> None: ...

    async def aclose(self) -> None: ...


class TargetPlugin[P: Params](Plugin):
    """A target kind's declaration, its factory and its optional hooks.

    It is built with its validated ``Params`` instance (of type ``P``), and
    with the run's ``TargetContext`` when it uses one (``uses_context``).
    """

    @classmethod
    def from_config(
        cls, config: dict[str, Any], context: TargetContext | None = None
    ) -> Target:
        # A plug-in class's constructor is its own (the Protocol has none).
        return cls(cls.parse(config), context)  # type: ignore[call-arg,return-value]  # see above

    @classmethod
    def prepare_for_run(
        cls, config: dict[str, Any], *, project: Project, dataset: Dataset, path: str
    ) -> tuple[dict[str, Any], Run | None]:
        """The configuration a new run freezes, and the run it builds on (its
        parent), checked against the run's project and dataset. A kind that
        builds on the project's data (chain: another run) checks it here."""
        return config, None

    @classmethod
    def request_for(cls, params: Any, item: TargetInput) -> dict[str, Any] | None:
        """The request body this kind sends for ``item`` with these validated
        ``params`` (what a result's page shows), derived as ``generate``
        builds it; None for a kind whose request is not one body. Never
        holds a secret: those go in headers, read when the call is made."""
        return None

    async def prepare(self) -> None:
        """ConfigError when it cannot work in this process, before any item runs."""

    async def aclose(self) -> None:
        """Release what it holds (a connection pool) once the run has ended."""


TARGETS: Registry[type[TargetPlugin[Any]]] = Registry(
    "target", TargetPlugin, "from_config", noun="target kind"
)
REGISTRY = TARGETS
register = TARGETS.register


def get_target_class(
    kind: str | None, *, field: str = "kind"
) -> type[TargetPlugin[Any]]:
    return TARGETS.lookup(kind, field=field)


def clean_target_config(
    kind: str | None, config: Any, *, path: str = "config", kind_field: str = "kind"
) -> dict[str, Any]:
    """A target kind's configuration, validated against its declaration, and
    at most ``EVALSITE_MAX_TARGET_CONFIG_BYTES`` as compact JSON, as it is
    stored (with its defaults)."""
    cleaned = get_target_class(kind, field=kind_field).clean(config, path=path)
    _check_config_size(cleaned, path=path)
    return cleaned


def _check_config_size(config: dict[str, Any], *, path: str) -> None:
    limit = settings.EVALSITE_MAX_TARGET_CONFIG_BYTES
    text = json.dumps(config, separators=(",", ":"), ensure_ascii=False, default=str)
    size = len(text.encode())
    if size > limit:
        raise ConfigError(
            f"is {size:,} bytes as compact JSON; at most {limit:,} "
            "(EVALSITE_MAX_TARGET_CONFIG_BYTES)",
            field=path,
        )


def build_target(
    kind: str, config: dict[str, Any], *, context: TargetContext | None = None
) -> Target:
    """Build a target; one that declares secrets gets them through ``context``.

    A kind that sets ``needs_context`` (one that reads the database for its
    project, as ``chain`` does) gets the context too; a kind that does
    neither is built from its configuration alone.
    """
    cls = get_target_class(kind)
    if cls.uses_context():
        return cls.from_config(config, context)
    return cls.from_config(config)

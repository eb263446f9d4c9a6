"""What every target and scorer kind declares, and what it is built with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, get_args

from runs.plugins.params import NoParams, Params, json_schema, validate


@dataclass(frozen=True, slots=True)
class SecretRef:
    """One secret a plug-in uses, and the configuration fields that name it.

    ``secret_field`` names a project secret; ``env_field`` (if any) an
    environment variable the operator allows in ``EVALSITE_ENV_SECRETS``.
    Either is sent only if one of its host patterns matches the URL in
    ``url_field``, the base of every request the plug-in makes with it: a
    plug-in that declares no ``url_field`` cannot use a project secret.
    """

    key: str  # the plug-in reads the value as ``context.secrets[key]``
    secret_field: str
    env_field: str | None = None
    url_field: str | None = None
    help: str = ""


@dataclass(frozen=True, slots=True)
class TargetContext:
    """What a plug-in is built with besides its parameters: its project and
    the values of the secrets it names (resolved by ``runs.secrets.store``)."""

    project_id: int | None = None
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The run it serves (a target of a run; None for a trial or a scorer).
    run_id: int | None = None


class Plugin:
    """The declaration every target and scorer kind makes."""

    kind: ClassVar[str]
    label: ClassVar[str]
    description: ClassVar[str] = ""
    Params: ClassVar[type[Params]] = NoParams
    example: ClassVar[dict[str, Any]] = {}
    # The secrets it uses: parameters that name a secret (never hold one),
    # resolved when a run builds the plug-in.
    secrets: ClassVar[tuple[SecretRef, ...]] = ()
    # Built with the run's context even without secrets of its own (one that
    # reads the database for its project, or wraps another plug-in).
    needs_context: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A kind written ``ScorerPlugin[MyParams]`` (or ``TargetPlugin[...]``)
        # has declared its parameters there: they are its ``Params``, unless
        # it sets ``Params`` itself.
        if "Params" in cls.__dict__:
            return
        for base in cls.__dict__.get("__orig_bases__", ()):
            for arg in get_args(base):
                if isinstance(arg, type) and issubclass(arg, Params):
                    cls.Params = arg
                    return

    @classmethod
    def clean(cls, params: Any, *, path: str = "") -> dict[str, Any]:
        """Validated, normalised parameters, or ConfigError naming the field."""
        return validate(
            cls.Params,
            params,
            path=path,
            noun=f"a parameter of {cls.kind}",
            exclude_none=True,
        )

    @classmethod
    def parse(cls, params: Any) -> Any:
        """The validated ``Params`` instance a plug-in is built with."""
        return cls.Params.model_validate(cls.clean(params))

    @classmethod
    def uses_context(cls) -> bool:
        """Whether it is built with the run's context (``TargetContext``)."""
        return bool(cls.secrets) or cls.needs_context

    @classmethod
    def secret_scope(
        cls, config: dict[str, Any]
    ) -> tuple[Sequence[SecretRef], dict[str, Any], str]:
        """The secrets a configuration names, the part of it that names them,
        and that part's path: a plug-in that wraps another (the ``scorer``
        target) names its inner plug-in's secrets inside its own configuration."""
        return cls.secrets, config, ""

    @classmethod
    def secret_params(cls) -> list[str]:
        """The parameters that name a secret (a project secret or a variable)."""
        return [
            name
            for ref in cls.secrets
            for name in (ref.secret_field, ref.env_field)
            if name
        ]

    @classmethod
    def summary(cls) -> str:
        text = cls.description or (cls.__doc__ or "")
        return " ".join(text.split())

    @classmethod
    def catalogue_extra(cls) -> dict[str, Any]:
        """What the catalogue says of this role besides the declaration."""
        return {}


def catalogue_entry(plugin: type[Plugin]) -> dict[str, Any]:
    """What ``GET /api/v1/scorers`` and ``/targets/kinds`` say about a kind."""
    return {
        "kind": plugin.kind,
        "label": plugin.label,
        "description": plugin.summary(),
        "parameters": json_schema(plugin.Params),
        "example": plugin.example,
        "secrets": plugin.secret_params(),
        **plugin.catalogue_extra(),
    }

"""The plug-in core: what a target or scorer kind declares, and what the
executor sees of one.

Below the executor and the secrets store, above the call policy and the
models: the registries of kinds (``TARGETS``, ``SCORERS``), the ``Params``
declaration base, the protocols and I/O types of targets and scorers,
``build_target`` and ``build_scorer``, where a scorer's work runs, and the
loading of third-party plug-ins. Built-in kinds live in ``runs.targets`` and
``runs.scorers`` and register themselves when those are imported.
"""

from __future__ import annotations

from runs.plugins.declaration import (
    Plugin,
    SecretRef,
    TargetContext,
    catalogue_entry,
)
from runs.plugins.loading import load_plugins
from runs.plugins.params import (
    BackoffBaseSeconds,
    BackoffCapSeconds,
    EnvName,
    FieldError,
    JsonKey,
    NoParams,
    Param,
    Params,
    SecretName,
    UnitThreshold,
    allowlisted,
    allowlisted_callable,
    describe,
    join,
    json_schema,
    load_callable,
    number,
    validate,
)
from runs.plugins.registry import Registry

__all__ = [
    "BackoffBaseSeconds",
    "BackoffCapSeconds",
    "EnvName",
    "FieldError",
    "JsonKey",
    "NoParams",
    "Param",
    "Params",
    "Plugin",
    "Registry",
    "SecretName",
    "SecretRef",
    "TargetContext",
    "UnitThreshold",
    "allowlisted",
    "allowlisted_callable",
    "catalogue_entry",
    "describe",
    "join",
    "json_schema",
    "load_callable",
    "load_plugins",
    "number",
    "validate",
]

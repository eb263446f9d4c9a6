"""A plug-in's parameters: declared once, and what is derived from them.

A target or scorer kind declares, in its own file, a ``Params`` model (pydantic:
types, defaults, bounds and help text), an example configuration and the
names of its parameters that refer to secrets. From that declaration come
the validation here, the form fields (``forms.py``), the command-line flags
(``evalrun``), the API schema and the catalogue. Run options are declared the
same way (``executor/options.py``) and go through the same functions.

A plug-in is built with its validated ``Params`` instance and reads its
parameters as attributes (``params.model``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any

from django.utils.module_loading import import_string
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from runs.errors import ConfigError


class Params(BaseModel):
    """Base of every plug-in's parameters: unknown keys are errors.

    A plug-in reads them as attributes. Reading them as a mapping
    (``params["model"]``, ``params.get("model")``) still works for plug-ins
    written when they were handed the stored dict, where a parameter left
    empty (None) was absent.
    """

    model_config = ConfigDict(extra="forbid")

    def __getitem__(self, name: str) -> Any:
        value = getattr(self, name, None) if name in type(self).model_fields else None
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _a_name(value: str) -> str:
    if value and not _NAME.fullmatch(value):
        raise ValueError("must be a name (letters, digits and _), not a value")
    return value


# Parameters that mean the same wherever they are declared (a plug-in's or a
# run option): their type, bounds and help said once. A field gives its
# default, and may give its own title and help.

# The name of a project secret, or of an environment variable the operator
# allows, that holds a credential: a name, never the credential itself.
SecretName = Annotated[str, Field(max_length=100), AfterValidator(_a_name)]
EnvName = Annotated[str, Field(max_length=100), AfterValidator(_a_name)]
# Which environment variables a plug-in may name (``EVALSITE_ENV_SECRETS``).
ENV_ALLOWED = "only those the operator allows"
ENV_ALLOWED_TO_HOSTS = f"{ENV_ALLOWED}, to the hosts they are bound to"
# The key of a field in a JSON object (an item's metadata, a model's reply).
JsonKey = Annotated[str, Field(min_length=1, max_length=100)]
# A pass threshold on a score from 0 to 1.
UnitThreshold = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
# The back-off between retries of a call (``runs.calls.retry.Backoff``).
BackoffBaseSeconds = Annotated[
    float,
    Field(
        ge=0,
        le=60,
        title="Back-off base (seconds)",
        description="First wait before a retry; doubled on each one, with jitter.",
    ),
]
BackoffCapSeconds = Annotated[
    float,
    Field(
        ge=0,
        le=600,
        title="Back-off cap (seconds)",
        description="Longest wait before a retry.",
    ),
]


def secret_name(use: str, *, label: str = "") -> Any:
    """The field of a ``SecretName`` parameter: empty (none) unless given.
    ``use`` says what the secret is for ("that holds the API key"), ``label``
    titles it ("API key" secret)."""
    return Field(
        "",
        title=f"{label} secret" if label else None,
        description=f"Name of the project secret {use}.",
    )


def env_name(use: str, *, label: str = "", allowed: str = ENV_ALLOWED) -> Any:
    """The field of an ``EnvName`` parameter, the environment variable that
    may stand for a secret (``secret_name``): said as that one is."""
    return Field(
        "",
        title=f"{label} environment variable" if label else None,
        description=f"Name of an environment variable {use} ({allowed}).",
    )


class NoParams(Params):
    pass


class FieldError(ValueError):
    """Raised inside a validator to name the parameter that is wrong."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


def allowlisted_callable(path: str, setting: str) -> str:
    """``path`` stripped, if the setting ``setting`` lists it; else ValueError
    (inside a parameter validator: the error names the parameter)."""
    from django.conf import settings

    path = path.strip()
    if not path:
        raise ValueError("is required (a dotted path)")
    allowlist = getattr(settings, setting)
    if path not in allowlist:
        allowed = ", ".join(allowlist) or "none"
        raise ValueError(f"{path!r} is not in {setting} (allowed: {allowed})")
    return path


def allowlisted(setting: str) -> AfterValidator:
    """The validator of a parameter naming a callable that ``setting`` lists
    (``Annotated[str, allowlisted("EVALSITE_PYTHON_TARGETS")]``)."""
    return AfterValidator(lambda path: allowlisted_callable(path, setting))


def load_callable(path: str) -> Callable[..., Any]:
    """The callable at the dotted ``path``; a ConfigError on the ``callable``
    parameter if it cannot be imported or is not callable."""
    try:
        fn = import_string(path)
    except ImportError as exc:
        raise ConfigError(f"cannot import {path!r}: {exc}", field="callable") from exc
    if not callable(fn):
        raise ConfigError(f"{path!r} is not callable", field="callable")
    return fn


def is_async(fn: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004  (an object's async __call__)
    )


async def call_sync_or_async(
    fn: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> Any:
    """What a loaded callable returns: awaited on the loop when it is async,
    else from a worker thread (which, past a timeout, no one can stop: the
    caller only stops waiting for it)."""
    if is_async(fn):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


# -- parameters, described -------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One parameter as forms, flags and the catalogue see it."""

    name: str
    type: str  # boolean, integer, number, string or json
    label: str
    help: str
    required: bool
    default: Any = None
    nullable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bounds(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f"{number(self.minimum)} to {number(self.maximum)}"
        if self.minimum is not None:
            return f"at least {number(self.minimum)}"
        if self.maximum is not None:
            return f"at most {number(self.maximum)}"
        return ""

    @property
    def default_json(self) -> str:
        return json.dumps(self.default)

    @property
    def type_label(self) -> str:
        if self.choices:
            return " | ".join(self.choices)
        return self.type + (" or null" if self.nullable else "")


def _default(info: Any, prop: dict[str, Any], *, required: bool) -> Any:
    if required or "default" in prop:
        return prop.get("default")
    # A default_factory ({} or []) is left out of the JSON Schema.
    return info.get_default(call_default_factory=True)


def number(value: float) -> str:
    """A bound as people write it: 1024, not 1024.0 or 1e+03."""
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value))
    return str(value)


@cache
def json_schema(model: type) -> dict[str, Any]:
    return _adapter(model).json_schema()


@cache
def describe(model: type) -> tuple[Param, ...]:
    """The parameters of a pydantic model or dataclass, in declaration order."""
    schema = json_schema(model)
    required = set(schema.get("required", ()))
    fields = model.__pydantic_fields__  # type: ignore[attr-defined]  # a pydantic model or dataclass
    params = []
    for name, prop in schema.get("properties", {}).items():
        info = fields[name]
        variants = prop.get("anyOf", [prop])
        concrete = [v for v in variants if v.get("type") != "null"]
        shape = concrete[0] if len(concrete) == 1 else {}
        kind = shape.get("type", "json")
        choices = tuple(shape.get("enum", ()))
        if "const" in shape:
            choices = (shape["const"],)
        if kind in ("object", "array"):
            kind = "json"
        params.append(
            Param(
                name=name,
                type=kind,
                label=info.title or name.replace("_", " ").capitalize(),
                help=info.description or "",
                required=name in required,
                default=_default(info, prop, required=name in required),
                nullable=len(concrete) < len(variants),
                minimum=shape.get("minimum", shape.get("exclusiveMinimum")),
                maximum=shape.get("maximum", shape.get("exclusiveMaximum")),
                choices=tuple(str(c) for c in choices),
                extra={
                    key.removeprefix("x-"): value
                    for key, value in prop.items()
                    if key.startswith("x-")
                },
            )
        )
    return tuple(params)


# -- validation ------------------------------------------------------------------


def join(path: str, *parts: Any) -> str:
    """``target_config`` + ``model`` -> ``target_config.model``; ints index."""
    for part in parts:
        if isinstance(part, int):
            path = f"{path}[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


def validate(
    model: type, data: Any, *, path: str, noun: str, exclude_none: bool = False
) -> dict[str, Any]:
    """Validate ``data`` against a declaration; the dict that is stored.

    A value of None means "not given": the default applies.
    """
    if not isinstance(data, dict):
        raise ConfigError("must be an object", field=path or None)
    data = {key: value for key, value in data.items() if value is not None}
    for param in describe(model):
        # pydantic takes True for 1; a flag is not a number.
        if param.type in ("integer", "number") and isinstance(
            data.get(param.name), bool
        ):
            noun = "a whole number" if param.type == "integer" else "a number"
            raise ConfigError(
                f"must be {noun}, not {data[param.name]!r}",
                field=join(path, param.name),
            )
    adapter = _adapter(model)
    try:
        value = adapter.validate_python(data)
    except ValidationError as exc:
        raise _config_error(model, exc, path=path, noun=noun) from None
    return adapter.dump_python(value, mode="json", exclude_none=exclude_none)


@cache
def _adapter(model: type) -> TypeAdapter[Any]:
    return TypeAdapter(model)


def _config_error(
    model: type, exc: ValidationError, *, path: str, noun: str
) -> ConfigError:
    error = exc.errors()[0]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        return ConfigError(cause.message, field=join(path, cause.field))
    loc = [part for part in error["loc"] if part not in ("function-after",)]
    name = loc[0] if loc else None
    param = next((p for p in describe(model) if p.name == name), None)
    return ConfigError(_message(error, param, noun), field=join(path, *loc) or None)


def _message(error: Any, param: Param | None, noun: str) -> str:
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"is not {noun}"
    bound = ("greater_than_equal", "less_than_equal", "greater_than", "less_than")
    if kind in bound and param is not None and param.bounds:
        return f"must be {_bounds_phrase(param)}, not {value!r}"
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return f"must be a whole number, not {value!r}"
    if kind in ("float_parsing", "float_type", "finite_number"):
        return f"must be a number, not {value!r}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false, not {value!r}"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected', '')}, not {value!r}"
    if kind == "string_type":
        return "must be a string"
    if kind in ("dict_type", "model_type", "dataclass_type"):
        return "must be an object"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    return str(error["msg"])


def _bounds_phrase(param: Param) -> str:
    if param.minimum is not None and param.maximum is not None:
        return f"between {number(param.minimum)} and {number(param.maximum)}"
    return param.bounds

"""One registry of plug-in classes by kind: targets, scorers (and any later role)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel

from runs.errors import ConfigError


class Registry[T: type](dict[str, T]):
    """The classes of one role, by kind; ``register`` checks the declaration.

    A dict, so that it is read (and, in tests, saved and restored) as one.
    """

    def __init__(self, role: str, base: type, method: str, *, noun: str = "") -> None:
        super().__init__()
        self.role = role
        self.noun = noun or role  # in "unknown <noun> 'x'"
        self.base = base
        # What a class of this role does (a target's from_config, a scorer's
        # score): what tells, in EVALSITE_PLUGINS, which role a class has.
        self.method = method

    def fits(self, cls: type) -> bool:
        return isinstance(cls, type) and hasattr(cls, self.method)

    def register[C: type](self, cls: C) -> C:
        """Add ``cls`` under its kind; refuse, at start-up, one that does not
        declare itself (a subclass of the role's base declares everything)."""
        missing = [] if issubclass(cls, self.base) else self.undeclared(cls)
        if missing:
            raise ImproperlyConfigured(
                f"{self.role} {cls.__module__}.{cls.__qualname__} does not declare "
                f"{', '.join(missing)}: subclass {self.base.__module__}."
                f"{self.base.__qualname__}"
            )
        adopted: Any = cls
        if not issubclass(cls, self.base):
            # Written against the declaration alone: it gets the role's
            # declared hooks, with their defaults.
            adopted = type(
                cls.__name__, (cls, self.base), {"__module__": cls.__module__}
            )
            adopted.__qualname__ = cls.__qualname__
            adopted.__doc__ = cls.__doc__
        self[cls.kind] = adopted  # type: ignore[attr-defined]  # checked: kind is declared
        return cls

    def undeclared(self, cls: type) -> list[str]:
        """What a class that does not subclass the role's base leaves out."""
        names = ("kind", "label", "Params", "example", "secrets", "clean", self.method)
        missing = [name for name in names if not hasattr(cls, name)]
        params = getattr(cls, "Params", None)
        if params is not None and not (
            isinstance(params, type) and issubclass(params, BaseModel)
        ):
            missing.append("Params (a pydantic model)")
        return missing

    def lookup(self, kind: object, *, field: str = "kind") -> T:
        """The class of ``kind``, or ConfigError listing the known kinds."""
        if isinstance(kind, str) and kind in self:
            return self[kind]
        known = ", ".join(sorted(self))
        raise ConfigError(f"unknown {self.noun} {kind!r} (known: {known})", field=field)

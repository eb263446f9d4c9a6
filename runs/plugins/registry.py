"""One registry of plug-in classes by kind: targets, scorers (and any later role)."""

from __future__ import annotations

import importlib
from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel

from runs.errors import ConfigError


class Registry[T: type](dict[str, T]):
    """The classes of one role, by kind; ``register`` checks the declaration.

    A dict, so that it is read (and, in tests, saved and restored) as one.

    A kind may be deferred: known by name, its class registered by importing
    its module when it is first looked up, or when the registry is read
    whole (its kinds listed, its classes iterated). A command that uses one
    scorer imports that scorer's module, not every other's.
    """

    def __init__(self, role: str, base: type, method: str, *, noun: str = "") -> None:
        super().__init__()
        self.role = role
        self.noun = noun or role  # in "unknown <noun> 'x'"
        self.base = base
        # What a class of this role does (a target's from_config, a scorer's
        # score): what tells, in EVALSITE_PLUGINS, which role a class has.
        self.method = method
        # Kinds registered by importing a module, not yet imported.
        self.deferred: dict[str, str] = {}

    def defer(self, kind: str, module: str) -> None:
        """``kind`` is registered by importing ``module``, once it is needed."""
        if not dict.__contains__(self, kind):
            self.deferred[kind] = module

    def kinds(self) -> list[str]:
        """Every kind, sorted, without importing the deferred ones."""
        return sorted({*dict.keys(self), *self.deferred})

    def load(self, kind: object = None) -> None:
        """Import the module of the deferred ``kind``; of every one without it."""
        if kind is None:
            for deferred in list(self.deferred):
                self.load(deferred)
        elif isinstance(kind, str) and kind in self.deferred:
            importlib.import_module(self.deferred[kind])
            self.deferred.pop(kind, None)

    # Every read of the dict sees the deferred kinds registered.

    def __getitem__(self, kind: str) -> T:
        self.load(kind)
        return dict.__getitem__(self, kind)

    def __contains__(self, kind: object) -> bool:
        self.load(kind)
        return dict.__contains__(self, kind)

    def get(self, kind: str, default: Any = None) -> Any:
        self.load(kind)
        return dict.get(self, kind, default)

    def __iter__(self) -> Iterator[str]:
        self.load()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.load()
        return dict.__len__(self)

    def keys(self) -> KeysView[str]:  # type: ignore[override]  # dict's view, a private class in typeshed
        self.load()
        return dict.keys(self)

    def values(self) -> ValuesView[T]:  # type: ignore[override]  # dict's view, a private class in typeshed
        self.load()
        return dict.values(self)

    def items(self) -> ItemsView[str, T]:  # type: ignore[override]  # dict's view, a private class in typeshed
        self.load()
        return dict.items(self)

    def __eq__(self, other: object) -> bool:
        self.load()
        return dict.__eq__(self, other)

    def __repr__(self) -> str:
        self.load()
        return dict.__repr__(self)

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
        self.deferred.pop(cls.kind, None)  # type: ignore[attr-defined]  # as above
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

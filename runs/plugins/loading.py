"""Third-party plug-ins: the modules and classes listed in ``EVALSITE_PLUGINS``.

Built-in kinds register themselves when ``runs.targets`` and ``runs.scorers``
are imported (``RunsConfig.ready``); a third-party entry is a dotted path to a
module (whose classes register themselves with ``@register``) or to a class
(registered here as a target or a scorer by what it does).
"""

from __future__ import annotations

import importlib

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from runs.plugins.scorers import SCORERS
from runs.plugins.targets import TARGETS


def load_plugins(paths: list[str]) -> None:
    """Import the modules and register the classes listed in EVALSITE_PLUGINS."""
    for path in paths:
        try:
            importlib.import_module(path)
            continue  # a module: its classes registered themselves
        except ModuleNotFoundError as exc:
            if exc.name != path:  # a module is missing, not a class named
                raise
        obj = import_string(path)
        registry = next((r for r in (SCORERS, TARGETS) if r.fits(obj)), None)
        if registry is None:
            raise ImproperlyConfigured(
                f"EVALSITE_PLUGINS: {path} is neither a target (from_config) "
                "nor a scorer (score)"
            )
        registry.register(obj)

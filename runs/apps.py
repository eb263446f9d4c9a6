from __future__ import annotations

import os
from typing import Any

from django.apps import AppConfig
from django.core import checks

# Settings read under a former name, and the name that replaced it.
RENAMED_SETTINGS = {"EVALSITE_TRY_CONCURRENCY": "EVALSITE_TRIES_AT_ONCE"}


def renamed_settings(**kwargs: Any) -> list[checks.CheckMessage]:
    """A warning for each setting the environment gives by its former name."""
    return [
        checks.Warning(
            f"{old} is now {new}; the old name is still read for now.",
            hint=f"Set {new} instead.",
            id="evalsite.W001",
        )
        for old, new in RENAMED_SETTINGS.items()
        if old in os.environ and new not in os.environ
    ]


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        from django.conf import settings

        # The pages' ``id`` path converter is registered with their URLs
        # (runs/web/routes.py): set-up imports none of the web layer.
        checks.register(renamed_settings)

        # Built-in plug-ins register themselves on import; third-party ones
        # are listed in a setting.
        from runs import scorers, targets  # noqa: F401
        from runs.plugins.loading import load_plugins

        load_plugins(settings.EVALSITE_PLUGINS)

        # The set-up is done: the collector runs again if manage.py held it.
        from evalsite.collector import collector_release

        collector_release()

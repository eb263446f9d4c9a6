from __future__ import annotations

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        from django.conf import settings

        # Built-in plug-ins register themselves on import; third-party ones
        # are listed in a setting.
        from runs import scorers, targets  # noqa: F401
        from runs.plugins import load_plugins

        load_plugins(settings.EVALSITE_PLUGINS)

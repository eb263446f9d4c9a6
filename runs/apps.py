from __future__ import annotations

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        from django.conf import settings
        from django.urls import register_converter
        from django.urls.converters import get_converters

        from runs.web.converters import IdConverter

        # Before any URLconf is read: every capability's URLs use it. (ready()
        # may run again in one process, as when a test reloads the apps.)
        if "id" not in get_converters():
            register_converter(IdConverter, "id")

        # Built-in plug-ins register themselves on import; third-party ones
        # are listed in a setting.
        from runs import scorers, targets  # noqa: F401
        from runs.plugins.loading import load_plugins

        load_plugins(settings.EVALSITE_PLUGINS)

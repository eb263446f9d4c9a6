from __future__ import annotations

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        # Plug-ins register themselves on import.
        from runs import scorers, targets  # noqa: F401

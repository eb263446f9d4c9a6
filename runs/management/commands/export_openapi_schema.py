"""django-ninja's ``export_openapi_schema``, offered here: ninja is no installed
app (evalsite/settings.py says why), so Django would not find its command.

    python manage.py export_openapi_schema --api runs.api.api [--output FILE]
"""

from __future__ import annotations

from ninja.management.commands.export_openapi_schema import Command

__all__ = ["Command"]

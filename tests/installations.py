"""Another installation's view of the database, for what is named after it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from runs.records.installation import database_id


@contextlib.contextmanager
def database_written(**written: Any) -> Iterator[None]:
    """This thread's connection names its database as ``written`` (HOST,
    PORT, NAME) meanwhile: a copy of its settings, as the dict itself is
    shared with the threads that read for pages and runs."""
    ours = connections[DEFAULT_DB_ALIAS]
    settings_dict = ours.settings_dict
    ours.settings_dict = {**settings_dict, **written}
    try:
        yield
    finally:
        ours.settings_dict = settings_dict


def database_id_of(**written: Any) -> str:
    """``database_id`` of a process that writes its database as ``written``."""
    with database_written(**written):
        return database_id()

"""An installation's name in a Redis that other installations may share."""

from __future__ import annotations

from typing import Any

import dj_database_url
import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections

from runs.records.installation import database_id


def id_of(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``database_id`` of a process whose DATABASE_URL is ``url``."""
    written: dict[str, Any] = dj_database_url.parse(url)
    # A copy on this thread's connection (the dict is shared with others).
    ours = connections[DEFAULT_DB_ALIAS]
    with monkeypatch.context() as patch:
        patch.setattr(ours, "settings_dict", {**ours.settings_dict, **written})
        return database_id()


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a PostgreSQL server's default port"
)
def test_a_url_without_its_port_names_the_database_of_the_default_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A web server given ``...@db:5432/evalsite`` and a worker given
    ``...@db/evalsite`` use one database: their runs' leases and live
    events must be named alike."""
    written = id_of("postgres://evalsite@db.internal:5432/evalsite", monkeypatch)

    assert id_of("postgres://evalsite@db.internal/evalsite", monkeypatch) == written
    assert id_of("postgres://evalsite@db.internal:5433/evalsite", monkeypatch) != (
        written
    )
    assert id_of("postgres://evalsite@db.internal/other", monkeypatch) != written

"""An installation's name in a Redis that other installations may share."""

from __future__ import annotations

from typing import Any

import dj_database_url
import pytest
from django.db import connection

from tests.installations import database_id_of


def id_of(url: str) -> str:
    """``database_id`` of a process whose DATABASE_URL is ``url``."""
    written: dict[str, Any] = dj_database_url.parse(url)
    return database_id_of(**written)


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a PostgreSQL server's default port"
)
def test_a_url_without_its_port_names_the_database_of_the_default_port() -> None:
    """A web server given ``...@db:5432/evalsite`` and a worker given
    ``...@db/evalsite`` use one database: their runs' leases and live
    events must be named alike."""
    written = id_of("postgres://evalsite@db.internal:5432/evalsite")

    assert id_of("postgres://evalsite@db.internal/evalsite") == written
    assert id_of("postgres://evalsite@db.internal:5433/evalsite") != written
    assert id_of("postgres://evalsite@db.internal/other") != written

"""The database a test's worker subprocesses are given: this process's, named
as this process names it."""

from __future__ import annotations

from typing import Any

import dj_database_url
import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from runs.records.installation import database_id
from tests.distributed.workers import database_url


@pytest.mark.parametrize(
    "written",
    [
        {"HOST": "127.0.0.1", "PORT": 5432},
        {"HOST": "127.0.0.1", "PORT": ""},  # a DATABASE_URL without a port
        {"HOST": "", "PORT": ""},  # nor a host: the server's socket
    ],
)
def test_a_worker_names_the_database_as_this_process_does(
    written: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's leases and live events in Redis are named after the database
    as written (``database_id``): a worker given it otherwise (a port or host
    filled in) holds leases the test does not count and sends events its
    pages do not hear."""
    # Copies on this thread's connection (the dict is shared with others).
    connection = connections[DEFAULT_DB_ALIAS]
    monkeypatch.setattr(
        connection, "settings_dict", {**connection.settings_dict, **written}
    )
    ours = database_id()

    theirs = dj_database_url.parse(database_url())
    monkeypatch.setattr(
        connection,
        "settings_dict",
        {**connection.settings_dict, **{k: theirs[k] for k in ("HOST", "PORT")}},
    )

    assert database_id() == ours

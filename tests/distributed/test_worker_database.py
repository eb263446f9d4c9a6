"""The database a test's worker subprocesses are given: this process's, named
as this process names it."""

from __future__ import annotations

from typing import Any

import dj_database_url
import pytest

from runs.records.installation import database_id
from tests.distributed.workers import database_url
from tests.installations import database_id_of, database_written


@pytest.mark.parametrize(
    "written",
    [
        {"HOST": "127.0.0.1", "PORT": 5432},
        {"HOST": "127.0.0.1", "PORT": ""},  # a DATABASE_URL without a port
        {"HOST": "", "PORT": ""},  # nor a host: the server's socket
    ],
)
def test_a_worker_names_the_database_as_this_process_does(
    written: dict[str, Any],
) -> None:
    """A run's leases and live events in Redis are named after the database
    as written (``database_id``): a worker given it otherwise (a port or host
    filled in) holds leases the test does not count and sends events its
    pages do not hear."""
    with database_written(**written):
        ours = database_id()
        theirs = dj_database_url.parse(database_url())

    assert database_id_of(HOST=theirs["HOST"], PORT=theirs["PORT"]) == ours

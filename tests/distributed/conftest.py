"""Workers as real subprocesses against the test database (PostgreSQL only):
the fixtures; what the tests do with workers is in ``workers.py``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from tests.distributed.workers import SHARD_SIZE, Workers


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    engine = django_settings.DATABASES["default"]["ENGINE"]
    if engine != "django.db.backends.postgresql":
        pytest.skip(
            "the distributed mode keeps its jobs in PostgreSQL: these tests run "
            "in the PostgreSQL pass (DATABASE_URL)"
        )
    if not os.environ.get("REDIS_URL"):
        pytest.skip("the distributed mode needs REDIS_URL")


@pytest.fixture
def distributed(settings: Any) -> None:
    """This process launches runs as the web server would: it defers shards."""
    settings.EVALSITE_EXECUTOR = "procrastinate"
    settings.EVALSITE_SHARD_SIZE = SHARD_SIZE


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()

"""The ``DATABASES`` setting: SQLite in WAL mode in the data directory, or the
database ``DATABASE_URL`` names (PostgreSQL with its connection options)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evalsite.env import env_bool, env_str
from runs.private_files import private_sqlite


def checkout_test_database(name: str, checkout: Path) -> str:
    """The PostgreSQL test database of the checkout at ``checkout``: the
    database's name and a short hash of the checkout's absolute path, within
    PostgreSQL's 63 characters."""
    digest = hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()[:10]
    return f"test_{name[:47]}_{digest}"


def databases(url: str, *, data_dir: Path, checkout: Path) -> dict[str, Any]:
    """``DATABASES``: the one ``url`` names, or SQLite in ``data_dir``."""
    if url:
        return {"default": url_database(url, checkout=checkout)}
    # Made owner-only before Django first connects: SQLite gives its -wal and
    # -shm files the database's mode.
    private_sqlite(data_dir / "evalsite.sqlite3")
    return {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(data_dir / "evalsite.sqlite3"),
            # Executors call the database many times a second: keep connections.
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": {
                # WAL lets the dashboard read while a run writes; IMMEDIATE
                # takes the write lock up front so concurrent writers wait
                # (busy timeout) instead of failing on a lock upgrade.
                "init_command": (
                    "PRAGMA journal_mode=WAL;"
                    "PRAGMA synchronous=NORMAL;"
                    "PRAGMA foreign_keys=ON;"
                ),
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
            # Tests run executors on other threads: a file (not the shared-cache
            # in-memory database, whose table locks ignore the busy timeout)
            # behaves like the real one. One per process, so suites can overlap.
            "TEST": {
                "NAME": str(
                    Path(tempfile.gettempdir()) / f"evalsite-test-{os.getpid()}.sqlite3"
                )
            },
        }
    }


def url_database(url: str, *, checkout: Path) -> dict[str, Any]:
    try:
        database: dict[str, Any] = dict(
            dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
        )
    except ValueError as exc:
        message = f"DATABASE_URL is not a database URL: {exc}"
        raise ImproperlyConfigured(message) from None
    if database["ENGINE"] != "django.db.backends.postgresql":
        return database
    # A connection attempt that the server never answers (one made as it
    # shuts down waits out its authentication_timeout, a minute) fails and
    # is retried, rather than outlasting a run's storage timeout. A
    # connect_timeout in the URL wins.
    options = database.setdefault("OPTIONS", {})
    options.setdefault("connect_timeout", 10)
    # The hot reads (runs.records.compiled), bound by the server, are
    # prepared once per connection: planning their joins cost the server
    # more than running them. Django's own queries are bound in the client
    # and never prepared (5 is psycopg's own threshold, for any other
    # statement bound by the server: procrastinate's, on the connections
    # it makes from these settings). Off for a pooler that cannot keep
    # prepared statements (PgBouncer in transaction mode before 1.21).
    options.setdefault(
        "prepare_threshold",
        5 if env_bool("EVALSITE_DB_PREPARED", default=True) else None,
    )
    # Django's test database would be test_<name> for every checkout: two
    # checkouts testing on one server would drop each other's.
    database["TEST"] = {
        "NAME": env_str("EVALSITE_TEST_DATABASE")
        or checkout_test_database(database["NAME"], checkout)
    }
    return database

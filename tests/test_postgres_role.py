"""`make distributed` connects as a role of its own, never as the superuser.

scripts/postgres_role.py runs against the test's PostgreSQL server (the
PostgreSQL pass), with the test's superuser as ``PG_ADMIN_URL``, under a role
and database name of each test's own, dropped afterwards.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from tests.processes import ROOT


@pytest.fixture
def admin_url(db: None) -> str:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): run in the PostgreSQL pass")
    where = connection.settings_dict
    password = f":{where['PASSWORD']}" if where.get("PASSWORD") else ""
    host = where.get("HOST") or "127.0.0.1"
    port = where.get("PORT") or 5432
    return f"postgres://{where['USER']}{password}@{host}:{port}/postgres"


@pytest.fixture
def name(admin_url: str) -> Iterator[str]:
    name = f"evalsite_role_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)
            )
        )
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def role_url(admin_url: str, name: str, data_dir: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(PG_ADMIN_URL=admin_url, PG_NAME=name, EVALSITE_DATA_DIR=str(data_dir))
    done = subprocess.run(
        [sys.executable, "scripts/postgres_role.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_role_is_no_superuser_and_owns_its_database(
    admin_url: str, name: str, tmp_path: Path
) -> None:
    url = role_url(admin_url, name, tmp_path / "data")

    password = (tmp_path / "data" / "postgres_password").read_text().strip()
    assert url.startswith(f"postgres://{name}:{password}@")
    assert url.endswith(f"/{name}")
    assert len(password) >= 32
    kept = tmp_path / "data" / "postgres_password"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    with psycopg.connect(url) as conn:
        assert conn.execute(
            "SELECT current_user, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles"
            " WHERE rolname = current_user"
        ).fetchone() == (name, False, False, False)
        conn.execute("CREATE TABLE made_by_the_role (x int)")
    # Again: the same role, password and database.
    assert role_url(admin_url, name, tmp_path / "data") == url


def test_a_database_made_as_the_superuser_is_handed_to_the_role(
    admin_url: str, name: str, tmp_path: Path
) -> None:
    """What `make distributed` made before: tables, a sequence, a function and
    an enum owned by the superuser. The role must own them to migrate."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    old_url = admin_url.rpartition("/")[0] + f"/{name}"
    with psycopg.connect(old_url, autocommit=True) as conn:
        conn.execute("CREATE TYPE status AS ENUM ('todo', 'done')")
        conn.execute("CREATE TABLE jobs (id bigserial PRIMARY KEY, s status)")
        conn.execute("CREATE TYPE pair AS (a int, b int)")
        conn.execute("CREATE FUNCTION one() RETURNS int AS 'SELECT 1' LANGUAGE sql")

    url = role_url(admin_url, name, tmp_path / "data")

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE jobs ADD COLUMN note text")
        conn.execute("ALTER TYPE status ADD VALUE 'failed'")
        conn.execute("ALTER TYPE pair ADD ATTRIBUTE c int")
        conn.execute(
            "CREATE OR REPLACE FUNCTION one() RETURNS int AS 'SELECT 2' LANGUAGE sql"
        )
        conn.execute("INSERT INTO jobs (s) VALUES ('failed')")
        assert conn.execute("SELECT one(), count(*) FROM jobs").fetchone() == (2, 1)

"""`make distributed`'s own PostgreSQL role and database; prints their URL.

The role ``$PG_NAME`` logs in with a password made once and kept in
``$EVALSITE_DATA_DIR/postgres_password`` (mode 0600); it is no superuser and
may create neither roles nor databases; it owns the database ``$PG_NAME``.
``$PG_ADMIN_URL`` (a superuser's URL) is used only here: to create the role
and the database, to set the role's password to the kept one, and to hand the
role a database (and its tables, functions and types) that an earlier version
of the script made as the superuser. Running it again changes nothing else.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runs.private_files import (  # noqa: E402  (after the path is set)
    FILE_MODE,
    private_dir,
    private_opener,
    tighten,
)

# Objects of the schema that the role must own to migrate it, by kind.
HANDOVER = {
    "TABLE": """
        SELECT format('%%I.%%I', n.nspname, c.relname) FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relowner <> %(role)s::regrole
          AND c.relkind IN ('r', 'p', 'f')""",
    # Views and sequences that no column owns (those follow their table).
    "VIEW": """
        SELECT format('%%I.%%I', n.nspname, c.relname) FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relowner <> %(role)s::regrole
          AND c.relkind = 'v'""",
    "SEQUENCE": """
        SELECT format('%%I.%%I', n.nspname, c.relname) FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relowner <> %(role)s::regrole
          AND c.relkind = 'S' AND NOT EXISTS (
            SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
            AND d.objid = c.oid AND d.deptype IN ('a', 'i'))""",
    "ROUTINE": """
        SELECT format('%%I.%%I(%%s)', n.nspname, p.proname,
                      pg_get_function_identity_arguments(p.oid))
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public' AND p.proowner <> %(role)s::regrole""",
    "TYPE": """
        SELECT format('%%I.%%I', n.nspname, t.typname) FROM pg_type t
        JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'public' AND t.typowner <> %(role)s::regrole
          AND (t.typtype IN ('e', 'r') OR (t.typtype = 'c' AND EXISTS (
            SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind = 'c')))""",
    "DOMAIN": """
        SELECT format('%%I.%%I', n.nspname, t.typname) FROM pg_type t
        JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'public' AND t.typowner <> %(role)s::regrole
          AND t.typtype = 'd'""",
}


def kept_password(data_dir: Path) -> str:
    private_dir(data_dir)
    path = data_dir / "postgres_password"
    try:
        with open(path, "x", opener=private_opener) as out:
            out.write(secrets.token_urlsafe(32))
    except FileExistsError:
        tighten(path, FILE_MODE)
    return path.read_text().strip()


def role_ensure(conn: psycopg.Connection, name: str, password: str) -> None:
    role = sql.Identifier(name)
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone():
        verb = sql.SQL("ALTER ROLE {} WITH")
    else:
        verb = sql.SQL("CREATE ROLE {}")
        print(f"created PostgreSQL role {name}", file=sys.stderr)
    conn.execute(
        sql.SQL(" ").join(
            [
                verb.format(role),
                sql.SQL("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
                    sql.Literal(password)
                ),
            ]
        )
    )


def database_ensure(conn: psycopg.Connection, admin_url: str, name: str) -> None:
    row = conn.execute(
        "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", [name]
    ).fetchone()
    ident = sql.Identifier(name)
    if row is None:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(ident, ident))
        print(f"created database {name}, owned by {name}", file=sys.stderr)
        return
    if row[0] != name:
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(ident, ident))
    # Tables an earlier version made as the superuser: the role must own them
    # to migrate them.
    url = make_conninfo(admin_url, dbname=name)
    with psycopg.connect(url, autocommit=True) as db:
        moved = 0
        for kind, query in HANDOVER.items():
            for (target,) in db.execute(query, {"role": name}).fetchall():
                db.execute(
                    sql.SQL("ALTER {} {} OWNER TO {}").format(
                        sql.SQL(kind), sql.SQL(target), ident
                    )
                )
                moved += 1
    if moved:
        print(f"handed {moved} objects of {name} to role {name}", file=sys.stderr)


def main() -> None:
    admin_url = os.environ["PG_ADMIN_URL"]
    name = os.environ["PG_NAME"]
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        sys.exit(f"PG_NAME must be a lower-case SQL name, not {name!r}")
    data_dir = Path(os.environ.get("EVALSITE_DATA_DIR") or ROOT / "var")
    password = kept_password(data_dir)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        role_ensure(conn, name, password)
        database_ensure(conn, admin_url, name)
    where = conninfo_to_dict(admin_url)
    # A socket directory is written as a percent-encoded host.
    host = quote(str(where.get("host") or "127.0.0.1"), safe="")
    port = where.get("port") or 5432
    print(f"postgres://{name}:{quote(password, safe='')}@{host}:{port}/{name}")


if __name__ == "__main__":
    main()
